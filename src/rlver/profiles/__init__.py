"""User profiles: the schema, loaders (native + published formats), bundled sets and downloads."""

from __future__ import annotations

from rlver.profiles.loaders import load_profiles, split_hidden_need
from rlver.profiles.schema import PUBLISHED_STYLES, Profile
from rlver.profiles.sets import BUNDLED_SETS, find_profile, load_profile_set

__all__ = [
    "BUNDLED_SETS",
    "PUBLISHED_STYLES",
    "Profile",
    "find_profile",
    "load_profile_set",
    "load_profiles",
    "split_hidden_need",
]
