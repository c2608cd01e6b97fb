"""Hidden checks, one module per notebook. Hidden test cells call them.

They live here, not in ``lib``, because ``lib`` ships to students and these
checks (and the reference solutions they inject) must not.
"""
