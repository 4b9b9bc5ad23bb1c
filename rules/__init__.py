"""The rule catalog (installed as `advisor.rules`): one module per rule, named after its id."""

from . import (
    device_imbalance,
    exposed_communication,
    float32_activations,
    float32_attention_logits,
    host_bound,
    host_device_transfer,
    launch_bound,
    layout_copies,
    missing_buffer_donation,
    missing_remat,
    pipeline_bubble,
    recompilation,
    remat_too_broad,
    replicated_state,
    scan_dynamic_update_slice,
    unaligned_matmul,
    unneeded_grad_accumulation,
)

ALL = [
    scan_dynamic_update_slice.RULE,
    missing_remat.RULE,
    missing_buffer_donation.RULE,
    float32_activations.RULE,
    float32_attention_logits.RULE,
    unneeded_grad_accumulation.RULE,
    recompilation.RULE,
    host_bound.RULE,
    host_device_transfer.RULE,
    remat_too_broad.RULE,
    replicated_state.RULE,
    exposed_communication.RULE,
    device_imbalance.RULE,
    pipeline_bubble.RULE,
    unaligned_matmul.RULE,
    layout_copies.RULE,
    launch_bound.RULE,
]
BY_ID = {rule.id: rule for rule in ALL}
