"""The rule catalog (installed as `advisor.rules`): one module per rule, named after its id."""

from . import missing_buffer_donation, missing_remat, scan_dynamic_update_slice

ALL = [
    scan_dynamic_update_slice.RULE,
    missing_remat.RULE,
    missing_buffer_donation.RULE,
]
BY_ID = {rule.id: rule for rule in ALL}
