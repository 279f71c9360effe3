"""What operators do to a running saga, as plumbing the tools share (``sagactl``, the console):
replaying dead letters (``replay``) and recording what was done to them
(``dead_letter_actions``)."""
