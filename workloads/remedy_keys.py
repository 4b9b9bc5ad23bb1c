"""The config keys both bundled workloads spell the same way for a remedy (no jax here: rules and
`advisor analyze` read these without importing the training code)."""

from __future__ import annotations

from . import parallel


def shared_remedy_config(remedy, config: dict) -> dict:
    """The config change for the remedies both workloads spell with the same keys (state donation,
    bfloat16 compute, minibatches, batch size, FSDP); {} when the config already has it or the
    remedy is not one of these (each workload maps its own: remat, layer scans)."""
    kind = getattr(remedy.kind, "value", remedy.kind)
    m, d, o = config.get("model", {}), config.get("data", {}), config.get("optimizer", {})
    n = o.get("num_minibatches", 1)
    if kind == "donate":
        return {} if config.get("train", {}).get("donate") else {"train.donate": True}
    if kind == "bfloat16":
        return {"model.dtype": "bfloat16"} if m.get("dtype") != "bfloat16" else {}
    if kind == "fewer_minibatches":
        return {"optimizer.num_minibatches": remedy.value or 1} if n > 1 else {}
    if kind == "more_minibatches":
        factor = remedy.value or 2
        return {"optimizer.num_minibatches": n * factor} if d.get("batch_size", 0) % (n * factor) == 0 else {}
    if kind == "smaller_batch":
        half = d.get("batch_size", 0) // 2
        return {"data.batch_size": half} if half >= n and half % n == 0 else {}
    if kind == "fsdp":
        return parallel.fsdp_config(config)
    if kind == "more_microbatches":
        return parallel.pipeline_config(config, remedy.value or 2 * config.get("parallel", {}).get(
            "pipeline.microbatches", 1))
    return {}
