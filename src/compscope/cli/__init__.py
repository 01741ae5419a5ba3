"""The ``compscope`` command: one module per command (``info``, ``scores``, ``pair``, …), each
with ``HELP``, ``add_arguments(parser)`` and ``run(args)``, registered in :mod:`.main`. Command
modules import nothing heavy at the top, so ``--help`` answers without torch."""
