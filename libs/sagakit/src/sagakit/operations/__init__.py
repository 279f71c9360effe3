"""What operators do to a running saga, as plumbing the tools share (``sagactl``, the console):
replaying dead letters (``replay``, ``replayer``) and recording what was done to them
(``dead_letter_actions``).

The console imports what it uses from here; the modules are the operations' own.
"""

from sagakit.operations.replay import Outcome, ReplayRefused
from sagakit.operations.replayer import DeadLetterApi, LetterUnavailable, Replayer

__all__ = ["DeadLetterApi", "LetterUnavailable", "Outcome", "ReplayRefused", "Replayer"]
