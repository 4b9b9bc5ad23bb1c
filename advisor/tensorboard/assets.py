"""The tab's static files: served by the plugin's own routes (offline: no CDN, no font, no framework)."""

# TensorBoard loads a plugin's es module in an iframe whose base is the plugin's routes; like the
# Profile plugin's, it moves that iframe to the plugin's page.
INDEX_JS = "export async function render() { document.location.href = 'index.html'; }\n"

# The run pickers open what they pick; a run being analyzed polls its status until it is done.
ADVISOR_JS = """
for (const sel of document.querySelectorAll('select[data-go]')) {
  sel.addEventListener('change', () => sel.form.submit());
}
const box = document.getElementById('progress');
if (box) {
  const poll = async () => {
    let st;
    try { st = await (await fetch(box.dataset.status, {cache: 'no-store'})).json(); }
    catch (e) { setTimeout(poll, 2000); return; }
    if (st.state === 'done') { location.reload(); return; }
    const text = box.querySelector('.stage');
    if (st.state === 'failed') { text.textContent = 'failed: ' + (st.error || 'unknown error'); return; }
    text.textContent = (st.stage || st.state) + (st.elapsed_s !== undefined ? ' (' + st.elapsed_s + ' s)' : '');
    setTimeout(poll, 1000);
  };
  setTimeout(poll, 500);
}
"""

EXTRA_CSS = """
header.bar{display:flex;flex-wrap:wrap;gap:12px;align-items:center;margin-bottom:8px}
header.bar form{display:flex;flex-wrap:wrap;gap:8px;align-items:center}
select{font:inherit;max-width:28em}
.tools{font-size:.9em;margin:6px 0 0}.tools a{margin-right:10px}
#progress{border:1px solid #d5d9e0;border-radius:6px;padding:10px 14px;background:#f7f9fc}
table.runs td{white-space:nowrap}
"""
