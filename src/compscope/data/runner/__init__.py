"""Running a model on data: one interface for compscope's toy models, ``transformers`` models and
TransformerLens models.

A runner holds a model that can run and the ``HeadWeights`` read from the same weights. Its one
method, :meth:`Runner.trace`, runs a batch of token sequences once and keeps, per layer, the
residual that the layer's attention reads (``resid``: before the norm in pre-LN models) and
what the attention added to the residual (``attn_out``). Everything per head — queries, keys,
values, patterns, each head's output — is then recomputed from ``HeadWeights`` with
:mod:`compscope.core.attention`, which the tests tie to each family's own modules (its sum
over heads equals ``attn_out``). So the data-based measures need from a model only these two
hook points per layer, which each family file names (``Family.hook_points``).

Where the weights come from decides how the model runs (nothing is ever downloaded):

- a toy model folder or ``induction-2l``: the toy model itself;
- a HuggingFace folder: ``transformers``, ``from_pretrained(folder, local_files_only=True)``;
- a ``.gguf`` file: ``transformers`` reading the same file (``gguf_file=``; needs ``accelerate``);
- a hub id (``owner/name[@revision]``): the snapshot folder (or its one ``.gguf``) that ``load`` reads;
- a loaded ``transformers`` model: itself;
- a TransformerLens ``HookedTransformer``, ``HookedEncoder`` or ``TransformerBridge``: itself,
  through its own hook points (``hook_resid_pre`` / ``ln1.hook_in`` and the attention output; the
  encoder's post-LN sums ``hook_resid_mid``, ``hook_resid_post``), with the weights it holds,
  processed or not (the processing TransformerLens did is part of the model that runs).

Where it runs (``device``): a model loaded from files goes where it is asked (default: CUDA when
torch sees it, else the CPU, as the engine); a model object given runs where its parameters are,
and is never moved. The trace and every recomputation stay on that device (:meth:`Runner.weights_here`);
what the data-based measures return comes back to the CPU. In what (``dtype``): a ``transformers``
model loaded from files runs in float32 unless asked for bfloat16 or float16 (half the memory of a
folder's parameters; transformers keeps a GGUF file's weights packed whatever the dtype; the
recomputation from ``HeadWeights`` stays float32, on the 16-bit residuals, and post-LN norms are
applied as float32 copies); a model object runs in its own dtype.

One module a way of running a model: :mod:`.base` (the interface, :class:`Runner`, and the
:class:`Trace` it returns), :mod:`.toy`, :mod:`.hf` (``transformers``, and loading one from local
files), :mod:`.transformer_lens`; :mod:`.choose` holds :func:`runner_for`, which picks one for what
it is given, and :func:`cannot_run`, which says, from files' headers alone, why one cannot be made.
Adding a way to run models is one module here and one branch in :mod:`.choose`.
"""

from .base import (PATTERN_COPIES, RUN_DTYPES, LayerState, Runner, Trace, evaluating, layer_state, model_device,
                   model_dtype, resolve_dtype, what_is)
from .choose import cannot_run, runner_for
from .hf import OLDEST_TRANSFORMERS, HFRunner, transformers_at_least
from .toy import ToyRunner
from .transformer_lens import TransformerLensRunner

__all__ = ["HFRunner", "LayerState", "OLDEST_TRANSFORMERS", "PATTERN_COPIES", "RUN_DTYPES", "Runner", "ToyRunner",
           "Trace", "TransformerLensRunner", "cannot_run", "evaluating", "layer_state",
           "model_device", "model_dtype", "resolve_dtype", "runner_for", "transformers_at_least", "what_is"]
