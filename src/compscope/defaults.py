"""Defaults that more than one place needs, kept here once (and free of heavy imports, so the
command line can show them in ``--help``)."""

#: the model commands use when none is named (a built-in name)
DEFAULT_MODEL = "induction-2l"
#: the seed of the repeated random sequences ``[bos] t t`` that validate and intervene read by default
#: (the metrics estimated on data read other sequences: ``MetricData``)
SEED = 12345
#: the ridge a metric's ``G`` is regularised by, ``G + ridge·tr(G)/d·I`` (``--ridge``, ``ridge=``)
RIDGE = 1e-6
#: the measures computed when none are named (the engine, ``compscope scores``)
MEASURES = ("frobenius", "frobenius_baselined", "tight", "overlap")
#: the measures followed over training when none are named (``compscope track``)
TRACKED_MEASURES = ("frobenius", "tight", "overlap")
#: the metrics followed over training when none are named (``compscope track``)
TRACKED_METRICS = ("identity", "embed")
#: the measures a report shows when none are named: every one the all-pairs engine gets from one product
REPORT_MEASURES = ("frobenius", "frobenius_baselined", "tight", "overlap", "shared_dims", "read_gain")
#: content distributions of the rotary previous-token score (``compscope circuits --content``)
CONTENTS = ("embed", "activations")
#: the metrics a report shows when none are named
REPORT_METRICS = ("identity", "embed")
#: pairs per kind and metric whose spectra and principal angles a report keeps (all of them when fewer)
DETAIL_PAIRS = 120
#: changes of a model's parameters ``compscope gauge`` makes, in the order it reports them
GAUGE_CHANGES = ("permutation", "rotation", "gain_rescale", "linear")
#: which paths from a writer to a reader an intervention follows (``compscope.data.intervene``):
#: the direct one (the default), or every path through the layers in between
PATHS = ("direct", "all")
#: the metrics a gauge check can apply to a changed model: those computed from each model's own
#: weights (one estimated on data would need the changed model to run; a Metric object stays with
#: the model it was made for)
GAUGE_METRICS = ("identity", "embed", "unembed")
#: how a metric estimated on data estimates each layer's G (``MetricData.shrinkage``,
#: ``--metric-shrinkage``): the sample moment shrunk by its Ledoit–Wolf intensity (the default),
#: or the sample moment itself
SHRINKAGES = ("ledoit-wolf", "none")

#: where QK-norm's Jacobian is taken (``--linearise-qk-norm [POINT]``): the isotropic point of the weights
#: alone (the default), or the second moment of what the heads read on the metrics' text (runs the model)
QK_NORM_POINTS = ("isotropic", "text")
#: the norms inside the heads' circuits that ``--linearise-norms [PARTS]`` replaces by their mean Jacobian on text:
#: QK-norm, an attention-output norm, a value norm, multi-head latent attention's latent norms
NORM_PARTS = ("qk", "output", "value", "latent")
