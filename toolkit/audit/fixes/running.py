"""The fixes stage as the rules of a running script ask for it
(:class:`~toolkit.audit.rules.running.fix_writer.FixWriter`): the script's driver hands this
module to them, and each rule says where its fix goes while this stage writes it in the user's
text, in plain PyTorch (:mod:`.script_edits`; a copy's own tensors, :mod:`.copy_edits`;
gradients switched back on, :mod:`.switch_edits`), registers what an optimizer misses
(:mod:`.registration`) and moves a finding's edits to where the user's code calls
(:mod:`.where_called`)."""

from toolkit.audit.fixes.copy_edits import (
    copy_anchor,
    copy_at_alias,
    copy_registered,
    copy_snapshot,
    copy_where_shared,
    data_copied,
    deep_copy_call,
    made_per_item,
)
from toolkit.audit.fixes.registration import registered
from toolkit.audit.fixes.script_edits import (
    as_parameter,
    backward_inputs,
    buffer_as_parameter,
    built_over_each,
    call_under_no_grad,
    detach_call,
    detach_expression,
    detach_undone,
    edit_at,
    import_edit,
    insert_after,
    insert_before,
    listed_module,
    listed_with,
    move_before,
    node_edit,
    parameters_from,
    remove_detach,
    replace_parameters,
    widen,
)
from toolkit.audit.fixes.switch_edits import (
    freeze_removed,
    off_decorator,
    out_of_no_grad,
    switch_on_after_its_step,
    switch_on_after_its_use,
    switch_on_before_loop,
    switch_on_with_the_rest,
    unfreeze_before,
)
from toolkit.audit.fixes.where_called import placed

__all__ = ["as_parameter", "backward_inputs", "buffer_as_parameter", "built_over_each",
           "call_under_no_grad", "copy_anchor", "copy_at_alias", "copy_registered", "copy_snapshot",
           "copy_where_shared", "data_copied", "deep_copy_call", "detach_call", "detach_expression",
           "detach_undone", "edit_at",
           "freeze_removed", "import_edit", "insert_after", "insert_before", "listed_module",
           "listed_with", "made_per_item", "move_before", "node_edit", "off_decorator",
           "out_of_no_grad", "parameters_from", "placed", "registered", "remove_detach",
           "replace_parameters", "switch_on_after_its_step", "switch_on_after_its_use",
           "switch_on_before_loop", "switch_on_with_the_rest", "unfreeze_before", "widen"]
