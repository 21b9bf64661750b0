"""Tasks: the arith testbed (``arith``), the hub datasets (``hub``) and their graders (``graders``)."""
