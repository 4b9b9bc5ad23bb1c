"""`run-workload --hosts N` on one machine: N local `jax.distributed` processes (gloo collectives
over 127.0.0.1), each profiling its part of the same data-parallel step, their traces put into
one run folder as `host0.xplane.pb`, `host1.xplane.pb`, ...: a real multi-host trace.

`parallel.data` counts the devices of all hosts (default: one per host); each process gets
`parallel.data / N` simulated CPU devices. The first host's `advisor_run.json` and memory
profile go beside the host files.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Callable

from .child_python import module_command
from .errors import AdvisorError
from .locate import MEMORY_PROFILE, RUN_METADATA

CHILD_TIMEOUT_S = 1800


def profile_hosts(name: str, preset: str, config: dict, hosts: int, logdir: Path,
                  progress: Callable[[str], None] = lambda msg: None) -> Path:
    """Run the workload on `hosts` local processes; return the run folder holding every host's trace."""
    total = config.get("parallel", {}).get("data", 1)
    if total <= 1:
        total = hosts
        config = {**config, "parallel": {**config.get("parallel", {}), "data": hosts}}
    if total % hosts:
        raise AdvisorError(f"parallel.data={total} must be a multiple of --hosts {hosts}: each host gets "
                           "the same number of devices")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    from . import cleanup
    tmp = cleanup.mkdtemp("hosts")
    procs = []
    try:
        (tmp / "config.json").write_text(json.dumps(config))
        # No compilation cache: a program loaded from it in one host and compiled in another could
        # disagree on the collectives' order (JAX shares compiles between hosts its own way).
        from advisor.workloads.parallel import xla_flags_with_cpu_devices
        env = {**os.environ, "JAX_PLATFORMS": "cpu", "ADVISOR_COMPILE_CACHE": "off",
               "XLA_FLAGS": xla_flags_with_cpu_devices(total // hosts)}
        progress(f"starting {hosts} host processes with {total // hosts} simulated devices each (gloo over 127.0.0.1)")
        procs += [subprocess.Popen(module_command("advisor.host_launcher", name, preset, str(tmp / "config.json"),
                                                  str(tmp / f"host{i}"), str(i), str(hosts), str(port)),
                                  env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                 for i in range(hosts)]
        errors = []
        for i, proc in enumerate(procs):
            try:
                _, err = proc.communicate(timeout=CHILD_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                _, err = proc.communicate()
            if proc.returncode:
                errors.append(f"host{i}: {(err or '').strip().splitlines()[-1:] or ['exit ' + str(proc.returncode)]}")
        if errors:
            raise AdvisorError(f"the host processes failed: {'; '.join(errors)}")
        return _merge(tmp, hosts, logdir)
    finally:
        for proc in procs:      # interrupted: the hosts stop too
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        cleanup.remove(tmp)


def _merge(tmp: Path, hosts: int, logdir: Path) -> Path:
    """One run folder under `<logdir>/plugins/profile/` with every host's trace under its host name."""
    first = Path((tmp / "host0" / "run_dir").read_text())
    run_dir = logdir / "plugins" / "profile" / f"{first.name}_{hosts}hosts"
    run_dir.mkdir(parents=True, exist_ok=False)
    for i in range(hosts):
        produced = Path((tmp / f"host{i}" / "run_dir").read_text())
        (xplane,) = produced.glob("*.xplane.pb")
        shutil.move(str(xplane), run_dir / f"host{i}.xplane.pb")
        if i == 0:
            for extra in (RUN_METADATA, MEMORY_PROFILE):
                if (produced / extra).exists():
                    shutil.move(str(produced / extra), run_dir / extra)
    return run_dir


def _child(name: str, preset: str, config_path: str, logdir: str, process_id: int, hosts: int, port: int) -> None:
    import jax

    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(f"127.0.0.1:{port}", num_processes=hosts, process_id=process_id)
    from .runner import profile_workload

    config = json.loads(Path(config_path).read_text())
    config = {s: {k: tuple(v) if isinstance(v, list) else v for k, v in f.items()} for s, f in config.items()}
    run_dir = profile_workload(name, preset, config, Path(logdir))
    (Path(logdir) / "run_dir").write_text(str(run_dir))
    jax.distributed.shutdown()


if __name__ == "__main__":
    _child(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7]))
