"""The tab's static files: served by the plugin's own routes (offline: no CDN, no font, no framework)."""

# TensorBoard loads a plugin's es module in an iframe whose base is the plugin's routes; like the
# Profile plugin's, it moves that iframe to the plugin's page, with the run the TensorBoard URL names
# (?advisor_run=RUN&advisor_compare=RUN#advisor: a link to a run's report can be shared). The values
# are passed on as written, percent-encoded: decoded here, a name's bytes that are not UTF-8 would be lost.
INDEX_JS = """export async function render() {
  const q = [];
  try {
    for (const part of window.top.location.search.slice(1).split('&')) {
      const m = /^advisor_(run|compare)=(.+)$/.exec(part);
      if (m) q.push(m[1] + '=' + m[2]);
    }
  } catch (e) {}
  document.location.href = 'index.html' + (q.length ? '?' + q.join('&') : '');
}
"""

# The run pickers open what they pick (their values are the runs' names percent-encoded, as the page
# carries them: app.run_ref); the TensorBoard URL names the run shown; the page follows TensorBoard's
# dark mode (its top page's body class; alone, the system's); a run not yet analyzed is started by a
# POST to `analyze` (a GET starts nothing), then its status is polled until it is done.
ADVISOR_JS = """
const theme = () => {
  let dark = false;
  try {
    dark = window.top === window ? window.matchMedia('(prefers-color-scheme: dark)').matches
                                 : window.top.document.body.classList.contains('dark-mode');
  } catch (e) {}
  document.documentElement.classList.toggle('dark', dark);
};
theme();
try {
  if (window.top !== window) {
    new MutationObserver(theme).observe(window.top.document.body, {attributes: true, attributeFilter: ['class']});
  }
} catch (e) {}
try {
  if (window.top !== window && 'run' in document.body.dataset) {
    const u = new URL(window.top.location.href);
    const kept = u.search.slice(1).split('&').filter(p => p && !/^advisor_(run|compare)=/.test(p));
    for (const k of ['run', 'compare']) {
      const v = document.body.dataset[k];
      if (v) kept.push('advisor_' + k + '=' + v);
    }
    u.search = kept.length ? '?' + kept.join('&') : '';
    window.top.history.replaceState(window.top.history.state, '', u);
  }
} catch (e) {}
for (const sel of document.querySelectorAll('select[data-go]')) {
  sel.addEventListener('change', () => {
    const q = [...sel.form.querySelectorAll('select[data-go]')].filter(s => s.value).map(s => s.name + '=' + s.value);
    location.href = 'index.html' + (q.length ? '?' + q.join('&') : '');
  });
}
const box = document.getElementById('progress');
if (box) {
  const start = async () => {
    try { return await (await fetch(box.dataset.start, {method: 'POST', cache: 'no-store'})).json(); }
    catch (e) { return null; }
  };
  const poll = async () => {
    let st;
    try { st = await (await fetch(box.dataset.status, {cache: 'no-store'})).json(); }
    catch (e) { setTimeout(poll, 2000); return; }
    if (st.state === 'none') { st = (await start()) || st; }     // the next step has not started yet
    if (st.state === 'done') { location.reload(); return; }
    const text = box.querySelector('.stage');
    if (st.state === 'failed') { text.textContent = 'failed: ' + (st.error || 'unknown error'); return; }
    text.textContent = (st.stage || st.state) + (st.elapsed_s !== undefined ? ' (' + st.elapsed_s + ' s)' : '');
    setTimeout(poll, 1000);
  };
  start().then(() => setTimeout(poll, 500));
}
"""

EXTRA_CSS = """
header.bar{display:flex;flex-wrap:wrap;gap:12px;align-items:center;margin-bottom:8px}
header.bar form{display:grid;grid-template-columns:max-content minmax(0,1fr);gap:6px 8px;align-items:center;
flex:1 1 100%;min-width:0}
header.bar label{display:contents}
select{font:inherit;width:100%;min-width:0;text-overflow:ellipsis}
.scroll{overflow-x:auto;max-width:100%}
body{overflow-wrap:break-word}code{overflow-wrap:anywhere}
.tools{font-size:.9em;margin:6px 0 0}.tools a{margin-right:10px}
#progress{border:1px solid #d5d9e0;border-radius:6px;padding:10px 14px;background:#f7f9fc}
table.runs{table-layout:fixed;width:100%;min-width:54em}table.runs td{overflow-wrap:anywhere}
table.runs col.when{width:12em}table.runs col.hosts{width:7em}table.runs col.size{width:5.5em}
table.runs col.brief{width:11em}table.runs .when{white-space:nowrap}
html.dark body{background:#202124;color:#e8eaed}
html.dark .card,html.dark .finding,html.dark td,html.dark th,html.dark #progress,html.dark h2{border-color:#5f6368}
html.dark .sev,html.dark code{background:#3c4043;color:#e8eaed}
html.dark #progress{background:#2d2f31}html.dark .meta{color:#9aa0a6}
html.dark a,html.dark details summary{color:#8ab4f8}
html.dark select{background:#303134;color:#e8eaed;border-color:#5f6368}
html.dark .chart svg{filter:invert(.9) hue-rotate(180deg)}
"""
