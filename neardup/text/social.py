"""Social-media decorations that verification strips before tokenising: repost markers
(``RT @user:``, ``//@用户:``), ``@mentions``, URLs and short links, ``#hashtags`` and weibo
``#topics#``.

Shared by the reference tokenizer (:func:`neardup.verify.tokenize`) and the byte-level token
kernels (:mod:`neardup.text.token_kernels`), which must strip exactly the same text.
"""

from __future__ import annotations

import re

__all__ = ["SOCIAL", "SOCIAL_MARKERS", "has_social_marker"]

#: substrings of a lower-cased text without which :data:`SOCIAL` cannot match (a cheap test
#: before the regex)
SOCIAL_MARKERS = ("@", "#", "http", "www.", "t.cn/", "bit.ly/", "t.co/")
_MARKER = re.compile("|".join(re.escape(m) for m in SOCIAL_MARKERS))


def has_social_marker(text: str) -> bool:
    """Whether ``text`` holds one of :data:`SOCIAL_MARKERS`: one regular expression scan
    instead of a substring test (and a generator step) per marker, on every non-ASCII text
    that verification and the MinHash channel tokenise."""
    return _MARKER.search(text) is not None


#: the decorations, on lower-cased text; ``SOCIAL.sub(" ", text)`` strips them
SOCIAL = re.compile(
    r"(?:\brt\s*@[^\s:：]+\s*[:：]?)"  # RT @user:
    r"|(?://\s*@[^\s:：]+\s*[:：]?)"  # //@用户:
    r"|(?:https?://\S+)"  # URLs
    r"|(?:\b(?:www\.|t\.cn/|bit\.ly/|t\.co/)\S*)"  # bare short links
    r"|(?:#[^#\s]{1,40}#)"  # weibo #topic#
    r"|(?:#\w+)"  # #hashtag
    r"|(?:@[\w\-]+)",  # @mention
    re.UNICODE,
)
