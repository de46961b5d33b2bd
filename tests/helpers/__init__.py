"""What every test directory shares: waiting for a condition, starting real clusters.

``tests/`` is on ``sys.path`` (pytest puts the root conftest's directory there), so
any test module imports these as ``from helpers.waiting import wait_until``.
"""
