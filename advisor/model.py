"""The device-agnostic profile model that rules read.

One `Profile` per run: its hosts (one `.xplane.pb` each), each host's devices with what they
did over the steps (`DeviceTotals`), and, read from the first host: what ran (ops with their self
time, grouped by program), when (steps), the optimized HLO of each program, the buffers live
at the step program's memory peak, and what the run itself recorded. A single-device run is
one host with one device. Loaders fill it with facts (totals over the steps, never a mean, a share
or a threshold: those are views, advisor/views); rules and views only read it.
Times are in nanoseconds and sizes in bytes throughout.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from typing import Optional

CONTROL_FLOW = frozenset({"while", "conditional", "call", "async-start", "async-done"})
COLLECTIVE_OPCODES = frozenset({"all-reduce", "all-gather", "reduce-scatter", "all-to-all", "ragged-all-to-all",
                                "collective-permute", "collective-broadcast"})


def collective_kind(opcode: str) -> str:
    """The collective an opcode performs ("all-reduce" for `all-reduce-start`), or "" if none."""
    base = opcode[:-6] if opcode.endswith("-start") else opcode[:-5] if opcode.endswith("-done") else opcode
    return base if base in COLLECTIVE_OPCODES else ""


def merge_intervals(spans) -> list[tuple[float, float]]:
    """Union of [start, end) intervals, so overlapping or nested events are not counted twice."""
    out: list[list[float]] = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return [(a, b) for a, b in out]


def overlap_ns(spans, start: float, end: float) -> float:
    """How much of [start, end) the (disjoint) spans cover."""
    return sum(max(0.0, min(b, end) - max(a, start)) for a, b in spans if a < end and b > start)


@dataclasses.dataclass(frozen=True)
class SourceLine:
    file: str
    line: int
    function: str = ""

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


# XLA:GPU's convolution custom calls (xla/service/gpu/cublas_cudnn.cc), on ROCm too (MIOpen runs them);
# their FLOPs: advisor/load/conv_cost.py
CONV_TARGETS = frozenset({"__cudnn$convForward", "__cudnn$convBackwardInput", "__cudnn$convBackwardFilter",
                          "__cudnn$convBiasActivationForward", "__cudnn$convForwardGraph"})

# Custom calls that run a kernel of the user's (Triton, Pallas): what kind (advisor/load/kernel_calls.py)
KERNEL_TARGETS = {"__gpu$xla.gpu.triton": "Triton", "triton_kernel_call": "Triton", "triton_kernel_call_ffi": "Triton",
                  "mosaic_gpu": "Mosaic GPU", "mosaic_gpu_v2": "Mosaic GPU"}


@dataclasses.dataclass(frozen=True)
class Cost:
    """One execution of one HLO instruction (XLA's conventions: advisor/load/hlo_cost.py)."""
    flops: Optional[float]      # None: the HLO does not say (a custom call other than a GEMM)
    transcendentals: float
    bytes: float                # operands read + result written, at the fusion's boundary


@dataclasses.dataclass
class Instruction:
    """One instruction of an optimized HLO module."""
    name: str
    opcode: str
    computation: str
    dtype: str                    # "f32", "bf16", ... ("tuple" for tuples)
    dims: tuple[int, ...]
    bytes: int
    op_name: str                  # JAX's op_name metadata, e.g. "jit(step)/transpose(jvp(M))/while/body/..."
    source: Optional[SourceLine]  # first frame in user code, if the trace carries it
    in_loop_body: bool            # runs inside a while loop body (a scan), at any depth
    fused_opcodes: frozenset[str] = frozenset()   # for fusions: the opcodes inside
    custom_call_target: str = ""
    matmul_dtype: str = ""      # for matmuls (dots, convolutions, GEMM calls): the operands' dtype
    sharded: Optional[bool] = None      # entry parameters: True split over devices, False replicated, None unknown
    group_size: Optional[int] = None    # collectives: devices in each replica group, where the HLO says
    operand_bytes: int = 0              # collectives: bytes of the operands (one device's input)
    # collectives: the device groups (ids in the mesh's device order) and, for collective-permute,
    # the (source, target) pairs, as the HLO lists them
    replica_groups: tuple[tuple[int, ...], ...] = ()
    source_target_pairs: tuple[tuple[int, int], ...] = ()
    operand_dims: tuple[tuple[int, ...], ...] = ()      # collectives: each operand's dims
    loop: str = ""                      # the innermost while instruction whose body runs this one
    # One execution's work (advisor/load/hlo_cost.py): flops None where the HLO does not say (a
    # custom call other than a GEMM); None for instructions that do not run as ops (fused ones).
    cost: Optional[Cost] = None
    runs: Optional[float] = None        # executions per execution of its program (loop trip counts); None unknown
    matmul_dims: tuple[int, ...] = ()   # dots, GEMM calls, fusions around a dot: (batch, M, N, K)
    changes_layout: bool = False        # a transpose, a copy into another layout, or a fusion of only those
    # Triton and Pallas custom calls (advisor/load/kernel_calls.py): the kernel's name, and whether its
    # Triton IR multiplies matrices
    kernel: str = ""
    kernel_dot: bool = False

    @property
    def shape(self) -> str:
        return f"{self.dtype}[{','.join(map(str, self.dims))}]"

    def does(self, opcode: str) -> bool:
        """True if this instruction is `opcode` or a fusion containing it."""
        return self.opcode == opcode or opcode in self.fused_opcodes

    @property
    def collective(self) -> str:
        """"all-reduce", "all-gather", ... for collectives (async pairs included), else ""."""
        return collective_kind(self.opcode)

    def bytes_moved(self, devices: int) -> int:
        """Bytes each device sends (and receives) for this collective in a ring over `devices`
        (its replica group where the HLO names one): the algorithmic traffic of NCCL's bus
        bandwidth. all-reduce 2 S (n-1)/n of its S-byte input; all-gather (n-1)/n of its output;
        reduce-scatter and all-to-all (n-1)/n of their input; collective-permute its input."""
        n = self.group_size or devices
        kind = self.collective
        if not kind or n <= 1 or self.opcode.endswith("-done"):
            return 0
        size = self.operand_bytes or self.bytes
        if kind == "all-reduce":
            return int(2 * size * (n - 1) / n)
        if kind == "all-gather":
            return int(max(self.bytes, size * n) * (n - 1) / n)
        if kind in ("collective-permute", "collective-broadcast"):
            return size
        return int(size * (n - 1) / n)

    @property
    def is_matmul(self) -> bool:
        """A dot or convolution, fused or not, or a library GEMM or convolution call (cuBLAS, hipBLASLt,
        cuDNN, MIOpen)."""
        if self.does("dot") or self.does("convolution") or self.is_convolution_call:
            return True
        target = self.custom_call_target.lower()
        return self.opcode == "custom-call" and (any(k in target for k in ("gemm", "matmul", "cublas", "hipblas"))
                                                 or self.is_attention)

    @property
    def label(self) -> str:
        """What a note names the op by: its custom call's target (and kernel), else its name."""
        if self.kernel:
            return f"{KERNEL_TARGETS.get(self.custom_call_target, 'user')} kernel {self.kernel} " \
                   f"({self.custom_call_target})"
        return self.custom_call_target or self.name

    @property
    def is_convolution_call(self) -> bool:
        """A convolution XLA hands to cuDNN or MIOpen (forward, input or filter gradient, fused epilogue)."""
        return self.opcode == "custom-call" and self.custom_call_target in CONV_TARGETS

    @property
    def is_attention(self) -> bool:
        """A fused attention call (cuDNN's flash attention, Transformer Engine): matmuls on the tensor cores."""
        target = self.custom_call_target
        return self.opcode == "custom-call" and (target.startswith("__cudnn$fmha")
                                                 or target.startswith("te_fused_attn_"))


class Instructions(Mapping):
    """Every instruction of a module, by name. Those of the computations that run as ops (the
    entry, loop bodies, called and branch computations) are built when the module is read; those
    inside fusions and reducers, most of a GPU module's and read by few rules, on first need: a
    name looked up that is one of theirs, or a walk over all of them (in the module's order).
    `op_names`, `dtypes`, `collectives` and `in_loops` answer from what the reader noted of them
    without building them."""

    def __init__(self, ops: dict, rest: Optional[InstructionsRest] = None, every: Optional[dict] = None):
        self.ops = ops
        self._rest = rest
        self._all = every if every is not None else ops if rest is None else None

    @property
    def built(self) -> bool:
        """Every instruction is built (those inside fusions too)."""
        return self._all is not None

    def complete(self) -> dict:
        if self._all is None:
            self._all = self._rest.build()
            self._rest = None       # and the module's bytes it held
        return self._all

    def __repr__(self) -> str:
        return f"Instructions({len(self.ops)} ops{'' if self.built else ', the fused ones not built yet'})"

    def __getitem__(self, name: str) -> Instruction:
        if self._all is not None:
            return self._all[name]
        ins = self.ops.get(name)
        if ins is not None:
            return ins
        if name in self._rest.names:
            return self.complete()[name]
        raise KeyError(name)

    def get(self, name, default=None):
        if self._all is not None:
            return self._all.get(name, default)
        ins = self.ops.get(name)
        if ins is not None or name not in self._rest.names:
            return ins if ins is not None else default
        return self.complete().get(name, default)

    def __contains__(self, name) -> bool:
        return name in self.ops or (name in self._rest.names if self._all is None else name in self._all)

    def __iter__(self):
        return iter(self.complete())

    def __len__(self) -> int:
        return len(self.complete())

    def __reduce__(self):
        return Instructions, (self.ops, None, self.complete())

    def op_names(self) -> Iterator[str]:
        """Every instruction's op_name, in the module's order."""
        return iter(self._rest.op_names) if self._all is None else (i.op_name for i in self._all.values())

    def dtypes(self) -> set[str]:
        """The dtypes of every instruction's result."""
        if self._all is None:
            return {i.dtype for i in self.ops.values()} | self._rest.dtypes
        return {i.dtype for i in self._all.values()}

    def collectives(self) -> list[Instruction]:
        """The collective instructions (fusions seldom hold one: then all are built to find it)."""
        every = self.ops if self._all is None and not self._rest.collectives else self.complete()
        return [i for i in every.values() if i.collective]

    def in_loops(self, opcode: str) -> Iterator[Instruction]:
        """The instructions inside while loop bodies that are `opcode` or fusions of it (fused ones
        built only when a loop runs a fusion of it)."""
        every = self.ops if self._all is None and opcode not in self._rest.opcodes_in_loops else self.complete()
        return (i for i in every.values() if i.in_loop_body and i.does(opcode))


class InstructionsRest:
    """What a module's reader noted of the instructions it has not built yet (those inside fusions
    and reducers), and how to build them: `build()` gives every instruction in the module's order.
    `op_names` are every instruction's, built or not, in that order."""

    def __init__(self, build: Callable[[], dict], names: frozenset, op_names: list, dtypes: set,
                 collectives: bool, opcodes_in_loops: frozenset):
        self.build, self.names, self.op_names, self.dtypes = build, names, op_names, dtypes
        self.collectives, self.opcodes_in_loops = collectives, opcodes_in_loops


@dataclasses.dataclass(frozen=True)
class Loop:
    """A while loop of an optimized module (a scan or fori_loop after lowering)."""
    name: str                   # the while instruction
    trip_count: Optional[int]   # XLA's known trip count, where it records one
    backward: bool              # the loop runs in the backward pass (JAX's transpose(...))
    parent: str = ""            # the while loop enclosing this one, if any


@dataclasses.dataclass
class HloModule:
    """The optimized module of one program (`name(program_id)` in xprof's terms)."""
    name: str
    program_id: int
    instructions: Instructions           # a plain dict given is wrapped
    aliased_parameters: frozenset[int]   # entry parameters aliased to an output (donated)
    parameter_bytes: dict[int, int]      # entry parameter number -> bytes
    output_bytes: int
    has_remat: bool                      # JAX marked some ops as rematerialized (checkpoint)
    grad_accumulation_steps: Optional[int] = None   # trip count of a loop computing gradients (0: unknown)
    # optax.MultiSteps: gradients accumulated across calls, the update applied every k-th (0: k unknown)
    multisteps_every: Optional[int] = None
    updated_parameters: frozenset[int] = frozenset()  # entry parameters returned updated (train state)
    # entry parameter number -> True split over devices, False a full copy on each, None unknown
    parameter_sharded: dict[int, Optional[bool]] = dataclasses.field(default_factory=dict)
    parameter_dims: dict[int, tuple[int, ...]] = dataclasses.field(default_factory=dict)   # per device
    # entry parameters: the devices holding the same data as device 0 (its copies, from the
    # parameter's sharding); () replicated on every device, None where the HLO does not say
    parameter_copies: dict[int, Optional[tuple[int, ...]]] = dataclasses.field(default_factory=dict)
    parameter_dtypes: dict[int, str] = dataclasses.field(default_factory=dict)
    # entry parameter number -> the argument path JAX names it by (`params[0]`, `opt_state[0].mu[0]`,
    # `state.params['Dense_0']['kernel']`), where the HLO records one
    parameter_names: dict[int, str] = dataclasses.field(default_factory=dict)
    loops: dict[str, Loop] = dataclasses.field(default_factory=dict)     # by while instruction name

    def __post_init__(self):
        if not isinstance(self.instructions, Instructions):
            self.instructions = Instructions(dict(self.instructions))

    @property
    def differentiates(self) -> bool:
        """Some op is in a backward pass (JAX names them `transpose(...)`)."""
        return any("transpose(" in n for n in self.instructions.op_names())

    def in_loop(self, loop: str, target: str) -> bool:
        """Whether the loop `loop` (an instruction's, "" outside loops) is `target` or nested in it."""
        seen = 0
        while loop and seen < 64:       # a bound, should a damaged trace's parents make a cycle
            if loop == target:
                return True
            loop = self.loops[loop].parent if loop in self.loops else ""
            seen += 1
        return False

    def collectives(self) -> list[Instruction]:
        """The module's collective instructions (async `-done` halves left out: the `-start` carries them)."""
        return [i for i in self.instructions.collectives() if not i.opcode.endswith("-done")]

    @property
    def key(self) -> str:
        return f"{self.name}({self.program_id})"


@dataclasses.dataclass
class Buffer:
    """A logical buffer live at the module's peak (xprof memory viewer)."""
    instruction: str
    shape: str          # e.g. "f32[4,8,128,512]"
    bytes: int
    group: str          # "Parameter", "Output", "Temporary", ...


@dataclasses.dataclass
class MemoryAtPeak:
    module: str                 # module key, e.g. "jit_train_step(66)"
    peak_bytes: int             # peak heap of the module, parameters included
    parameter_bytes: int
    buffers: list[Buffer]

    def bytes_by_group(self) -> dict[str, int]:
        """Bytes live at the peak per group ("Parameter", "Temporary", ...), groups in first-seen order."""
        out: dict[str, int] = {}
        for b in self.buffers:
            out[b.group] = out.get(b.group, 0) + b.bytes
        return out


@dataclasses.dataclass
class OpStat:
    """Self time of one HLO op over the profiled window, summed over its occurrences."""
    module: str                 # module key
    name: str                   # hlo_op
    self_ns: float
    count: int
    device: str = ""            # plane name on GPU/TPU traces; "" on the CPU backend


@dataclasses.dataclass
class DeviceSummary:
    """One accelerator's activity over the profiled window (GPU and TPU traces)."""
    name: str                       # plane name, e.g. "/device:GPU:0"
    description: str                # e.g. "NVIDIA H100 80GB HBM3" or "AMD GPU, gfx9.4, 304 CUs"
    vendor: str = ""
    compute_capability: str = ""
    core_count: Optional[int] = None        # SMs (NVIDIA) or CUs (AMD)
    clock_mhz: Optional[float] = None
    memory_bytes: Optional[int] = None
    memory_bandwidth_bytes_per_s: Optional[int] = None
    kernel_count: int = 0
    kernel_ns: float = 0.0
    # kernels by duration: bucket i holds those shorter than KERNEL_BUCKETS_NS[i] and not shorter than the
    # edge before it (the last: the rest); their count and their summed duration (ns)
    kernel_counts: list[int] = dataclasses.field(default_factory=list)
    kernel_bucket_ns: list[float] = dataclasses.field(default_factory=list)
    memcpy_count: int = 0
    memcpy_ns: float = 0.0
    busy: list[tuple[float, float]] = dataclasses.field(default_factory=list)   # merged
    time_by_category: dict[str, float] = dataclasses.field(default_factory=dict)
    launches_matched: int = 0                       # kernels joined to their host launch (correlation id)
    # host launch -> kernel start, apart: launches made while the device still ran earlier work wait for it
    # (queueing: the host running ahead), launches onto an idle device show the launch's own overhead
    launches_queued: int = 0
    launch_queue_median_ns: Optional[float] = None
    launch_overhead_median_ns: Optional[float] = None
    launch_call_median_ns: Optional[float] = None   # the host's launch call (cuLaunchKernel, cuGraphLaunch) itself
    peak_flops_per_s: Optional[float] = None        # the plane's own peak stats (TPU), where the trace has them
    peak_bytes_per_s: Optional[float] = None
    graph_launches: int = 0                         # launches of XLA command buffers (CUDA graphs), whole trace
    graph_kernels: int = 0                          # kernels run inside them and attributed to their instructions
    graph_unattributed: int = 0                     # kernels inside them no instruction could be matched to
    graph_unattributed_why: str = ""

    @property
    def active(self) -> bool:
        return self.kernel_count + self.memcpy_count > 0


# The edges (ns) of the kernel duration buckets (`DeviceSummary.kernel_counts`): a binning of the facts,
# 1-2-5 per decade, which any threshold on a kernel's duration a view asks (one of these edges) reads.
KERNEL_BUCKETS_NS = (1_000.0, 2_000.0, 5_000.0, 10_000.0, 20_000.0, 50_000.0, 100_000.0, 200_000.0, 500_000.0,
                     1_000_000.0, 10_000_000.0)


@dataclasses.dataclass
class AllocatorPeak:
    """Peak memory of one allocator, from its MemoryAllocation/MemoryDeallocation events."""
    allocator: str                  # e.g. "GPU_0_bfc"
    peak_bytes: int                 # most bytes allocated at once inside the window
    lifetime_peak_bytes: int        # the allocator's own peak_bytes_in_use (since process start)
    events: int


@dataclasses.dataclass
class Step:
    number: int
    start_ns: float
    end_ns: float
    annotated: bool = True      # False: inferred from the step program's executions
    device_timed: bool = False  # True: timed by the device work its annotation launched (the step does not block)

    @property
    def duration_ns(self) -> float:
        return self.end_ns - self.start_ns


@dataclasses.dataclass
class HostEvent:
    """A host-side event that explains time: "compile", "sync" (waiting on a device value), "transfer", or
    "tool" (advisor.trace's own wait at the end of each step, whose syncs are not the program's)."""
    name: str
    start_ns: float
    duration_ns: float
    category: str


@dataclasses.dataclass
class Transfer:
    kind: str                   # "H2D", "D2H", "D2D", "P2P", "Other"
    start_ns: float
    duration_ns: float
    bytes: Optional[int]        # None where the trace does not record the size (CPU backend)
    device: str


@dataclasses.dataclass
class MemoryProfileEntry:
    kind: str           # "buffer" or "executable"
    device: str
    bytes: int
    count: int
    sites: list[tuple[str, int]] = dataclasses.field(default_factory=list)   # user "file:line func" -> bytes


@dataclasses.dataclass
class DeviceTotals:
    """What one device did over its host's profiled steps, summed (the traced window where the
    trace has no steps): the facts the activity view (advisor/views/activity.py) takes per-step
    means, idle and exposed time, top ops and the slowest device from.

    Each device's own op events say which device ran them (the `device_ordinal` stat on CPU, the
    plane on GPU/TPU); which ops are collectives comes from their HLO instruction's opcode. Waits
    are for peers to arrive inside collectives (CPU: the rendezvous `Wait: pending_threads` events).
    """
    name: str                       # "cpu:3" (CPU backend) or the plane, e.g. "/device:GPU:0"
    host: str                       # the host file's name, e.g. "worker0"
    window_ns: float                # the host's steps' total time (the traced window when steps is 0)
    steps: int                      # steps measured; 0: the trace has none, figures are over its window
    busy_ns: float = 0.0            # some op of the device running
    collective_ns: float = 0.0      # some collective of the device running
    hidden_ns: float = 0.0          # some collective running with compute of this device beside it
    wait_ns: float = 0.0            # some wait-for-peers event of the device open, inside a collective
    collectives: dict[str, float] = dataclasses.field(default_factory=dict)   # HLO instruction -> ns
    collective_wait: dict[str, float] = dataclasses.field(default_factory=dict)  # instruction -> wait ns
    collective_hidden: dict[str, float] = dataclasses.field(default_factory=dict)  # instruction -> ns beside compute
    peak_bytes: Optional[int] = None        # the device's memory peak (step program, or its allocator)
    op_ns: dict[str, float] = dataclasses.field(default_factory=dict)   # each non-collective op's time, ns
    time_by_category: dict[str, float] = dataclasses.field(default_factory=dict)  # op time by category, ns


@dataclasses.dataclass
class Host:
    """One `.xplane.pb` of a run: its own clock, its own steps, and the devices it drove."""
    name: str                       # the file's stem, e.g. "worker0" for worker0.xplane.pb
    path: str
    steps: list[Step]
    devices: list[DeviceTotals]
    compile_in_steps_ns: float = 0.0    # the host compiling inside its steps, over all of them (its compile events)

    def step_ns(self, number: int) -> Optional[float]:
        return next((s.duration_ns for s in self.steps if s.number == number), None)


@dataclasses.dataclass
class Profile:
    path: str                                   # the .xplane.pb analyzed
    backend: str                                # "cpu", "gpu", "tpu"
    device_name: str
    steps: list[Step]
    ops: list[OpStat]
    modules: dict[str, HloModule]               # by key "name(program_id)"
    step_module: Optional[str]                  # key of the program that dominates op time
    memory: Optional[MemoryAtPeak]              # for the step module
    device_memory_profile: list[MemoryProfileEntry]
    run_metadata: dict                          # advisor_run.json when present, else {}
    # the versions the trace's /host:metadata plane names (jax_version, cuda_version, rocm_version, ...:
    # JAX 0.9 and later write them), text by stat name
    trace_versions: dict = dataclasses.field(default_factory=dict)
    device_capacity_bytes: Optional[int] = None
    notes: list[str] = dataclasses.field(default_factory=list)
    # What could not be read (HLO, buffer assignment, memory profile, side files) and which rules that
    # silenced: a partial analysis says so, in the report and the JSON envelope's `warnings`.
    warnings: list[str] = dataclasses.field(default_factory=list)
    busy: list[tuple[float, float]] = dataclasses.field(default_factory=list)   # device executing, merged
    host_events: list[HostEvent] = dataclasses.field(default_factory=list)
    transfers: list[Transfer] = dataclasses.field(default_factory=list)
    devices: list[DeviceSummary] = dataclasses.field(default_factory=list)    # accelerators, active or not
    allocators: list[AllocatorPeak] = dataclasses.field(default_factory=list)
    hosts: list[Host] = dataclasses.field(default_factory=list)     # the first is the one read in full
    views: dict = dataclasses.field(default_factory=dict)   # derived views by name, each computed once (advisor/views)

    @property
    def device_totals(self) -> list[DeviceTotals]:
        """Every device of every host, in host then device order."""
        return [d for h in self.hosts for d in h.devices]

    @property
    def device_count(self) -> int:
        return max(1, len(self.device_totals))

    @property
    def active_devices(self) -> list[DeviceSummary]:
        return [d for d in self.devices if d.active]

    def in_steps(self, start_ns: float, end_ns: float) -> bool:
        """True if [start, end) overlaps a profiled step (or there are no steps)."""
        if not self.steps:
            return True
        return any(start_ns < s.end_ns and end_ns > s.start_ns for s in self.steps)

    def instruction(self, op: OpStat) -> Optional[Instruction]:
        mod = self.modules.get(op.module)
        return mod.instructions.get(op.name) if mod else None

    def is_container(self, op: OpStat) -> bool:
        instr = self.instruction(op)
        return instr.opcode in CONTROL_FLOW if instr else op.name.split(".")[0] in CONTROL_FLOW
