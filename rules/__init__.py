"""The rule catalog (installed as `advisor.rules`): one module per rule, named after its id; `ALL` in the
order reports list them, `select` for the ids a user chose."""

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
    unfused_attention,
    unneeded_grad_accumulation,
    unneeded_remat,
)

ALL = [
    scan_dynamic_update_slice.RULE,
    missing_remat.RULE,
    missing_buffer_donation.RULE,
    float32_activations.RULE,
    float32_attention_logits.RULE,
    unneeded_grad_accumulation.RULE,
    unneeded_remat.RULE,
    unfused_attention.RULE,
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


def select(select=None, ignore=()) -> list:
    """The rules chosen by id, in the catalog's order: select None for every rule, an empty list
    (`--select none`) for none; an unknown id is one clear error (AdvisorError)."""
    from advisor.errors import AdvisorError, did_you_mean

    select = None if select is None else list(select)
    for rid in [*(select or ()), *ignore]:
        if rid not in BY_ID:
            raise AdvisorError(f"unknown rule id {rid!r}; {did_you_mean(rid, BY_ID, 'ids')} (see `advisor rules`)")
    return [r for r in ALL if (select is None or r.id in select) and r.id not in set(ignore)]
