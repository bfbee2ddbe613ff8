"""Suite-wide settings."""

from hypothesis import settings

# A per-example deadline is a timing assertion: on a loaded 2-core machine (CI) a slow example
# says nothing about the code. Property tests keep their example counts, without deadlines.
settings.register_profile("suite", deadline=None)
settings.load_profile("suite")
