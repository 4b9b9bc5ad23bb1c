"""What an expert would say about each corpus program, rule by rule, and why.

Each case: `about` (the program in one line), `devices` (simulated CPU devices it needs),
`device_memory` (optional: the capacity in bytes the analysis assumes, as `--device-memory`),
`mentions` (optional): rule id -> text its finding must name (title or source), `avoids`
(optional): rule id -> text its finding must not say (wrong advice), and
`expect`: rule id -> (verdict, reason), where the verdict is
- "fire": the rule must report it (any severity),
- "silent": the rule must not report anything,
- "at most info" / "at most warning": it may stay silent or report at no higher severity.
A rule a case does not name is held to DEFAULT. Verdicts are judged on the program as an
expert reads it, not on what advisor says today.
"""

from __future__ import annotations

SEVERITIES = ("info", "warning", "error")

RULES = ("scan-dynamic-update-slice", "missing-remat", "missing-buffer-donation", "float32-activations",
         "float32-attention-logits", "unneeded-grad-accumulation", "recompilation", "host-bound",
         "host-device-transfer", "remat-too-broad", "replicated-state", "exposed-communication", "device-imbalance",
         "pipeline-bubble", "unaligned-matmul", "layout-copies", "launch-bound", "unneeded-remat",
         "unfused-attention")

DEFAULT = {rule: ("silent", "the program has no such problem") for rule in RULES}
DEFAULT["float32-activations"] = (
    "at most info", "CPU backend: bfloat16 is no faster and saves no memory here, so nothing stronger than a note")

FIRST_COMPILE = "the compiles in the window are each function's one-time first compile (init included)"
TINY_STATE = "the undonated state is well under 10 MiB: donation would save nothing that matters"
ONE_COMPILE_AT_START = "the one compile in the window lands in the first profiled step and never repeats"
NO_PRESSURE = "memory is plentiful on this host; remat would cost step time for memory nobody is short of"

CASES: dict[str, dict] = {
    "linen_cnn_first_call": {
        "about": "Flax Linen CNN + Adam, traced from the first call (init and compile inside), no annotations",
        "expect": {
            "recompilation": ("silent", FIRST_COMPILE),
            "host-bound": ("silent", "the first step's compile is not host overhead and the loop never syncs"),
            "missing-remat": ("at most info", NO_PRESSURE),
            "missing-buffer-donation": ("at most info", TINY_STATE),
        },
    },
    "pmap_first_call": {
        "about": "pmap data-parallel MLP + SGD on 8 devices, traced from the first call",
        "devices": 8,
        "expect": {
            "recompilation": ("silent", "step 0 compiles the pmapped step (and its slicing helpers) once"),
            "host-bound": ("silent", "the first step's compile is excluded and the loop never syncs"),
            "missing-buffer-donation": ("at most info", TINY_STATE),
        },
    },
    "recompile_batch_size": {
        "about": "plain JAX MLP + SGD momentum whose batch size changes every step (warm, annotated)",
        "mentions": {"recompilation": "train_step"},
        "expect": {
            "recompilation": ("fire", "train_step is compiled again on every step for a new batch shape"),
            "host-bound": ("at most warning", "the device does idle while the host compiles; naming it again is tolerable"),
            "missing-buffer-donation": ("at most info", TINY_STATE),
        },
    },
    "scan16_no_checkpoint": {
        "about": "plain JAX lax.scan over 16 stacked layers, no checkpointing, Adam, donated",
        "expect": {
            "missing-remat": ("fire", "stacked activations are ~37% of peak; jax.checkpoint measured 206 -> 144 MiB"),
            "scan-dynamic-update-slice": ("at most warning", "the stacking copies are real; whether they cost enough time is a judgement"),
        },
    },
    "scan16_checkpoint": {
        "about": "the same 16-layer lax.scan with jax.checkpoint around each layer",
        "expect": {
            "missing-remat": ("silent", "every layer is already checkpointed"),
            "scan-dynamic-update-slice": ("silent", "remat inside the scan is already done; the stacked buffers left are weight gradients"),
        },
    },
    "linen_loop_2d_bigbatch": {
        "about": "Flax Linen residual MLP blocks in a Python loop, 2-D activations, batch 4096, SGD momentum",
        "expect": {
            "missing-remat": ("fire", "2-D activations of 6 blocks at batch 4096 are most of peak memory"),
        },
    },
    "small_cnn_plenty_memory": {
        "about": "small Flax Linen CNN + SGD momentum, donated, warm, annotated",
        "expect": {
            "missing-remat": ("at most info", NO_PRESSURE),
        },
    },
    "sync_every_step": {
        "about": "tiny plain-JAX loop (sub-ms steps) that prints float(loss) and pulls the weights to NumPy every step",
        "expect": {
            "host-bound": ("fire", "the host blocks on the device every step; the step is tiny so the wait is a large share"),
            "recompilation": ("silent", ONE_COMPILE_AT_START),
            "missing-buffer-donation": ("at most info", TINY_STATE),
            "host-device-transfer": ("at most info", "the per-step device-to-host fetch is small; the sync is the problem"),
        },
    },
    "never_syncs": {
        "about": "the same small loop keeping losses on device, printing once after the loop",
        "expect": {
            "host-bound": ("silent", "nothing in the loop waits on the device"),
            "recompilation": ("silent", ONE_COMPILE_AT_START),
            "missing-buffer-donation": ("at most info", TINY_STATE),
        },
    },
    "no_donation_large_state": {
        "about": "plain JAX MLP with 3x 1024x1024 weights + Adam, small batch, jitted without donation",
        "expect": {
            "missing-buffer-donation": ("fire", "params + Adam moments (~36 MiB) are held twice at the peak"),
        },
    },
    "donated_large_state": {
        "about": "the same large-state Adam MLP with donate_argnums=(0, 1)",
        "expect": {},
    },
    "clean_mlp": {
        "about": "well-written small MLP classifier + AdamW: jitted, donated, warm, annotated, no syncs",
        "expect": {"float32-activations": ("silent", "activations are a negligible share of memory")},
    },
    "nnx_mlp_adamw": {
        "about": "Flax NNX MLP (batch 4096), nnx.Optimizer(AdamW), nnx.jit, warm, annotated",
        "expect": {
            "missing-buffer-donation": ("at most info", TINY_STATE),
            "missing-remat": ("at most info", NO_PRESSURE),
            "host-bound": ("silent", "nnx.jit's per-call Python overhead is small next to a ~300 ms step"),
        },
    },
    "nnx_cnn_first_call": {
        "about": "Flax NNX CNN + SGD, traced from the first call (construction and compile inside), no annotations",
        "expect": {
            "recompilation": ("silent", FIRST_COMPILE),
            "host-bound": ("silent", "the first step's compile is not host overhead and the loop never syncs"),
            "missing-remat": ("at most info", NO_PRESSURE),
            "missing-buffer-donation": ("at most info", TINY_STATE),
        },
    },
    "linen_transformer_scan": {
        "about": "small Flax Linen Transformer LM, 8 blocks under nn.scan, no remat, AdamW, donated",
        "expect": {
            "missing-remat": ("fire", "per-block activations (float32 attention scores and MLP hiddens) dominate peak memory"),
            "scan-dynamic-update-slice": ("at most warning", "the stacking copies are real; whether they cost enough time is a judgement"),
        },
    },
    "linen_transformer_scan_remat": {
        "about": "the same Transformer with nn.remat(Block) inside nn.scan",
        "expect": {
            "missing-remat": ("silent", "every block is already rematted"),
            "scan-dynamic-update-slice": ("silent", "remat inside the scan is already done"),
            "remat-too-broad": ("at most warning", "rematting the whole block is the common choice; finer remat is a judgement"),
        },
    },
    "rnn_scan_time": {
        "about": "plain JAX GRU over 32 time steps with lax.scan, Adam, donated, warm, annotated",
        "expect": {
            "scan-dynamic-update-slice": ("at most warning", "a scan over time, not layers: BPTT needs the stacked states, "
                                          "but a tiny cell's per-iteration copies are real time and `unroll=` can help"),
        },
    },
    "sharded_jit_warm": {
        "about": "data-parallel MLP with sharded jit (NamedSharding, 8 devices), donated, warm, annotated",
        "devices": 8,
        "expect": {},
    },
    "sharded_jit_first_call": {
        "about": "the same sharded-jit program traced from the first call, no annotations",
        "devices": 8,
        "expect": {
            "recompilation": ("silent", FIRST_COMPILE),
            "host-bound": ("silent", "the first step's compile is not host overhead and the loop never syncs"),
        },
    },
    "pmap_warm": {
        "about": "pmap data-parallel MLP + Adam on 8 devices, batch placed sharded once, donated, warm, annotated",
        "devices": 8,
        "expect": {"recompilation": ("silent", ONE_COMPILE_AT_START)},
    },
    "static_lr_recompile": {
        "about": "plain JAX step with the learning rate as a static argument, decayed every step",
        "mentions": {"recompilation": "sgd_step"},
        "expect": {
            "recompilation": ("fire", "each new static learning rate compiles sgd_step again, every step"),
            "host-bound": ("at most warning", "the device does idle while the host compiles; naming it again is tolerable"),
            "missing-buffer-donation": ("at most info", TINY_STATE),
        },
    },
    "unannotated_clean": {
        "about": "clean plain-JAX MLP + SGD, warm, donated, traced without step annotations",
        "expect": {},
    },
    "linen_batchnorm_cnn": {
        "about": "Flax Linen CNN with BatchNorm in a flax TrainState, SGD momentum, donated, warm, annotated",
        "expect": {"missing-remat": ("at most info", NO_PRESSURE)},
    },
    "numpy_loader_mlp": {
        "about": "MNIST-style MLP + Adam fed small NumPy batches every step, donated, warm, annotated",
        "expect": {
            "host-device-transfer": ("at most info", "392 KiB per step is small next to a step of tens of ms"),
        },
    },
    "pipeline_gpipe_m2": {
        "about": "Part 3.1-style shard_map pipeline, data=2 x pipe=4, 2 microbatches (fori_loop of 5), Adam",
        "devices": 8,
        "expect": {
            "pipeline-bubble": ("fire", "3 of 5 iterations (60%) are padding on every stage; 16 microbatches make it 16%"),
            "float32-activations": ("silent", "the [1, ...] stage weights, their gradients and slices are weights, not activations"),
            "scan-dynamic-update-slice": ("at most info", "a pipeline schedule loop's stacked residuals: remat of the "
                                          "stage step is the lever, and it costs time (info without memory pressure)"),
            "exposed-communication": ("at most info", "CPU backend: stage transfers are thread copies"),
        },
    },
    "pipeline_gpipe_m16": {
        "about": "the same pipeline with 16 microbatches (fori_loop of 19)",
        "devices": 8,
        "expect": {
            "float32-activations": ("silent", "the [1, ...] stage weights, their gradients and slices are weights, not activations"),
            "scan-dynamic-update-slice": ("at most info", "a pipeline schedule loop's stacked residuals: remat of the "
                                          "stage step is the lever, and it costs time (info without memory pressure)"),
            "exposed-communication": ("at most info", "CPU backend: stage transfers are thread copies"),
        },
    },
    "pipeline_looping": {
        "about": "Part 3.2-style looping pipeline, data=2 x pipe=4, 2 loops x 4 microbatches (fori_loop of 11), Adam",
        "devices": 8,
        "expect": {
            "pipeline-bubble": ("fire", "3 of 11 iterations (27%) are padding; 8 microbatches make it 16%"),
            "float32-activations": ("silent", "the stacked stage weights and their gradients are weights, not activations"),
            "scan-dynamic-update-slice": ("at most info", "a pipeline schedule loop's stacked residuals: remat of the "
                                          "stage step is the lever, and it costs time (info without memory pressure)"),
            "exposed-communication": ("at most info", "CPU backend: stage transfers are thread copies"),
        },
    },
    "tensor_parallel_sync": {
        "about": "Part 4.1-style tensor parallelism, data=2 x tensor=4, all_gather / psum_scatter per MLP block, Adam",
        "devices": 8,
        "expect": {
            "exposed-communication": ("at most info", "CPU backend; and grouping gradients cannot apply to activation collectives"),
            "replicated-state": ("at most info", "6 MiB of state split over tensor, copied on both data devices: "
                                 "worth saying, but no memory pressure"),
        },
    },
    "tensor_parallel_async": {
        "about": "Part 4.2-style asynchronous tensor parallelism: the same blocks with ppermute rings, Adam",
        "devices": 8,
        "expect": {
            "exposed-communication": ("at most info", "CPU backend: a permute is a blocking rendezvous of threads"),
            "replicated-state": ("at most info", "6 MiB of state split over tensor, copied on both data devices: "
                                 "worth saying, but no memory pressure"),
        },
    },
    "parallel_3d": {
        "about": "Part 5-style data=2 x pipe=2 x tensor=2, 4 microbatches, state copied over data (no FSDP), Adam",
        "devices": 8,
        "expect": {
            "replicated-state": ("fire", "24 MiB of state per device is split over pipe and tensor but copied on both data devices"),
            "float32-activations": ("silent", "the stage weights and their gradients are weights, not activations"),
            "scan-dynamic-update-slice": ("at most info", "a pipeline schedule loop's stacked residuals: remat of the "
                                          "stage step is the lever, and it costs time (info without memory pressure)"),
            "exposed-communication": ("at most info", "CPU backend: collectives are thread copies"),
            "missing-buffer-donation": ("silent", "the state is donated"),
        },
    },
    "parallel_3d_fsdp": {
        "about": "the same 3D program with the weights and Adam state also split over data (FSDP)",
        "devices": 8,
        "expect": {
            "replicated-state": ("silent", "FSDP already splits the state over data"),
            "float32-activations": ("silent", "the gathered stage weights and their gradients are weights, not activations"),
            "scan-dynamic-update-slice": ("at most info", "a pipeline schedule loop's stacked residuals: remat of the "
                                          "stage step is the lever, and it costs time (info without memory pressure)"),
            "exposed-communication": ("at most info", "CPU backend: collectives are thread copies"),
        },
    },
    "per_example_grads": {
        "about": "DP-SGD-style vmap(grad) per-example gradients [64, 256, 256], clipped, SGD, donated",
        "expect": {
            "float32-activations": ("silent", "the per-example gradients are gradients, not activations"),
            "missing-remat": ("at most info", "the bulk of memory is per-example gradients, which remat does not save"),
        },
    },
    # Written fresh as new users would (issue 21): each held what advisor got wrong before.
    "wide_mlp_unrolled": {
        "about": "Linen MLP of 8 auto-named residual blocks (Block_0..7) in a Python loop, batch 4096, Adam",
        "expect": {
            "missing-remat": ("fire", "the blocks' saved activations (~420 MiB) are most of peak; layers counted "
                                      "from Linen's automatic names"),
        },
    },
    "nnx_layer_list": {
        "about": "NNX MLP whose 8 blocks are an nnx.List of modules, batch 4096, nnx.Optimizer(Adam), not donated",
        "avoids": {"missing-remat": "differ in shape"},
        "expect": {
            "missing-remat": ("fire", "the blocks' saved activations are most of peak; NNX op names carry no module "
                                      "path, so layers are counted from source line and op"),
            "missing-buffer-donation": ("at most info", "48 MiB of state is 9% of a 537 MiB peak: worth a note"),
        },
    },
    "pytree_mlp_layers": {
        "about": "Equinox-style plain JAX: a list of per-layer dicts, a Python loop, 8 layers at batch 4096, Adam",
        "expect": {
            "missing-remat": ("fire", "384 MiB of saved activations of 8 layers whose inputs are shaped like the "
                                      "step's input"),
        },
    },
    "heterogeneous_cnn": {
        "about": "VGG-style Linen CNN, stages of 32/64/128 channels at halving resolution, batch 128, SGD momentum",
        "avoids": {"missing-remat": "scan over the layers"},
        "expect": {
            "missing-remat": ("at most info", "activations dominate but nothing is short of memory; the stages differ "
                                              "in shape, so a scan cannot stack them"),
        },
    },
    "bigru_time_scan": {
        "about": "bidirectional GRU (nn.RNN of GRUCell both ways) over 128 time steps, batch 256, Adam",
        "avoids": {"scan-dynamic-update-slice": "unroll the layers"},
        "expect": {
            "scan-dynamic-update-slice": ("at most info", "the stacking copies are real, but the scan runs over time: "
                                          "the lever is remat of the cell, which costs step time"),
        },
    },
    "multisteps_accumulation": {
        "about": "optax.MultiSteps(adam, every_k_schedule=4) on an MLP, one call per minibatch of 256",
        "device_memory": 16 * 2**30,
        "mentions": {"unneeded-grad-accumulation": "MultiSteps"},
        "expect": {
            "unneeded-grad-accumulation": ("fire", "the whole batch of 1024 needs ~43 MiB of 16 GiB; MultiSteps "
                                           "accumulates across calls with a gradient-sized accumulator"),
        },
    },
    "numpy_features_every_step": {
        "about": "16 MiB of NumPy features passed to the jitted step every step, not blocked per step, Adam",
        "expect": {
            "host-device-transfer": ("fire", "a 16 MiB host-to-device copy per step; asynchronous dispatch puts "
                                     "the copies in earlier steps' windows"),
            "host-bound": ("at most warning", "the device does wait on the copies; naming it is fair"),
        },
    },
    "slow_host_numpy": {
        "about": "MLP + SGD whose batches the host augments in NumPy before every step (crops, flips, jitter: "
                 "tens of ms) while the step computes for a few ms; no syncs, donated, warm, annotated",
        "expect": {
            "host-bound": ("fire", "the loop is paced by the host's NumPy work: timed without the profiler, the "
                           "step alone takes 13-21 ms and the loop 95-100 ms a step, so the device idles ~80%"),
            "host-device-transfer": ("at most info", "the 2.3 MiB batch copied each step is small next to the "
                                     "NumPy work that makes it"),
        },
    },
    "dpsgd_per_example": {
        "about": "DP-SGD: vmap(grad) per-example gradients, flattened for their norms, clipped and noised, SGD",
        "expect": {
            "float32-activations": ("silent", "the per-example gradients (flattened per example for the norm) are "
                                    "gradients, not activations"),
        },
    },

}


def expectation(case: str, rule: str) -> tuple[str, str]:
    return CASES[case]["expect"].get(rule, DEFAULT[rule])


def satisfied(verdict: str, severities: list[str]) -> bool:
    """Whether the findings a rule reported (their severities) meet the verdict."""
    if verdict == "fire":
        return bool(severities)
    if verdict == "silent":
        return not severities
    limit = verdict.removeprefix("at most ")
    return all(SEVERITIES.index(s) <= SEVERITIES.index(limit) for s in severities)
