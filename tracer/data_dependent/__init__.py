"""Values a meta tensor does not have: the stated assumptions a traced program runs on.

``routing`` states MoE routing, ``shadows`` keeps the values vramsim knows, ``bounds`` the least and
greatest values of integer indices that follow from shapes (and refuses a lookup past its table),
``policy`` runs ops and answers reads under these assumptions, ``fallbacks`` are the fake kernels of
data-dependent ops over unknown values.

A meta tensor has a shape and no values, so three things a real program does cannot happen on
it: reading a value (``.item()``, ``.tolist()``, ``if t:``, ``.cpu()``), ops whose output size
depends on values (``nonzero``, ``torch.where(cond)``, boolean indexing, ``masked_select``,
``unique``, ``bincount``...), and kernels whose meta check is stricter than the device's
(``torch._grouped_mm`` accepts only bf16 on meta). ``DataDependentPolicy`` answers all three at
the aten level, so it works for any model without per-model patches, with these assumptions:

1. **Known values are followed exactly.** Tensors whose values vramsim knows carry a CPU
   *shadow* of their values: synthesised inputs (``seed``), small factory results (``zeros``,
   ``arange``, ``full``... up to ``FACTORY_LIMIT`` elements) and the MoE routing below. An op
   whose meta inputs all have shadows is also run on the shadows (outputs up to
   ``SHADOW_LIMIT`` elements), so ``expert_mask.sum(...).nonzero()``, ``counts.tolist()`` or
   ``lengths.max().item()`` get the value the assumed inputs imply, and data-dependent output
   sizes come out of the real op.
2. **MoE routing** (``moe_routing``): the indices of ``topk`` / ``argmax`` / ``max(dim)`` on a
   meta tensor, which is how routers pick experts, get values that realise the chosen load:
   ``balanced`` (default: each of E experts receives tokens*top_k/E rows), ``worst-case``
   (every token picks the same top_k experts, which receive all tokens each) or
   ``capacity:F`` (experts fill up in order to F times the balanced load: the most skew a
   capacity factor F allows; ``capacity:1`` is ``balanced``). Each token still picks top_k
   distinct experts.
3. **Unknown booleans are True**: ``if mask.all():`` and any boolean read of an unknown tensor
   answer True (no padding, no packing), and data-dependent sizes over unknown values assume
   every element is selected: ``nonzero``/``torch.where(cond)``/boolean indexing/``masked_select``
   keep all elements, ``unique`` finds all elements distinct, ``bincount`` has
   ``max(minlength, n)`` bins for n values. These are the largest sizes, so memory is not
   under-predicted.
4. **Optimizer step counters** read on the device are the step number.
   **No fp16 overflow**: ``GradScaler``'s inf check (``_amp_foreach_non_finite_check_and_unscale_``)
   leaves ``found_inf`` at 0, so ``scaler.step`` runs the optimizer step every step.
5. ``torch._grouped_mm`` of dtypes the meta check refuses gets the output the kernel's own
   shape rule gives (CUDA and CPU builds run non-bf16 inputs through their fallback kernel);
   CTC loss (no meta kernel) gets its ``log_alpha`` from the known input and target lengths,
   else from the padded sizes. A 0-dim CPU tensor beside meta tensors, which devices take as a
   scalar but some meta kernels refuse (``masked_fill``'s value), is moved to meta and the op retried.
6. **Anything else is refused**: an integer or float read of a value computed from weights or
   activations has no honest answer, and raises ``UnsupportedError`` naming the module.

Every assumption that shaped a value the program read or sized is appended once to the notes
list the report prints.
"""

from .policy import NOTE_BOOL, NOTE_SELECT_ALL, DataDependentPolicy
from .routing import ROUTING_CHOICES, Routing, parse_routing
from .shadows import forget_seeds, seed

__all__ = [
    "NOTE_BOOL",
    "NOTE_SELECT_ALL",
    "ROUTING_CHOICES",
    "DataDependentPolicy",
    "Routing",
    "forget_seeds",
    "parse_routing",
    "seed",
]
