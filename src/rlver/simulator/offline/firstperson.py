"""The profile's third person in the user's own voice: "She moved his seat" -> "I moved his seat".

A profile is written *about* the user; the offline user answers *as* that person
(:mod:`rlver.simulator.offline.story`). Chinese needs only the user's name and pronoun (她 or 他, not
他们/其他) replaced by 我. English needs a handful of lexical rules, applied word by word:

* the user's name and the subject pronoun of the user's gender become "I" (a name after a preposition
  "me", a possessive "my"), and the verb after a new "I" loses its third-person -s ("feels" -> "feel",
  "is" -> "am"), as does one joined to it by "and"/"but" ("... and cares about the boy");
* "herself"/"himself" becomes "myself";
* an object "him"/"her" becomes "me", unless the user is the subject of its clause ("I love my brother
  and don't want to let him down": he is the brother) and nobody else became one since ("I want
  someone to sit with him": "me");
* a possessive "his"/"her" becomes "my", unless someone of the user's gender (or of no stated gender:
  a parent, a friend) was named earlier in the clause ("A parent ... saying I humiliated her son");
* quotations are someone else's words and stay as they are.

No parser: what the rules cannot resolve stays wrong. "her" for a second woman named in the same clause
as the user's own mother stays "her" where the user would say "my", and a "her" before an adjective
("made her ungrateful") is only caught after a few causative verbs. Every bundled profile's story
reads as first person (tests/simulator/test_offline_answers.py checks a few of its lines).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Voice:
    """Who the user is in the profile's text: the pronoun of their gender and their name(s)."""

    pronoun: str  # "she" / "he" (en), "她" / "他" (zh), "" when unknown
    names: tuple[str, ...]  # the full name first, then the given name


# -- first person: English ----------------------------------------------------------------------------
def word_set(words: str) -> frozenset[str]:
    """A word list written as one string (the lists read better as prose than as Python lists)."""
    return frozenset(words.split())


_PIECE = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)*|[\W\d_]+")
_LETTERS = re.compile(r"[^\W\d_]")
#: The word (or number) after a pronoun: "her 12-year-old" is a possessive, "her." an object.
_NEXT = re.compile(r"\s*([^\W_][\w'’-]*)")
#: A quotation: someone else's words, left as they are ("her mother said 'drawing won't get you ...'").
_QUOTE = re.compile(r"(?<![\w])['‘\"“](?=\S)(?:[^'’\"”]|(?<=\w)['’](?=\w))*?['’\"”](?![\w])")
_CLAUSE_END = re.compile(r"[;:.!?()]")
_SUBJECT = {"she": "she", "he": "he"}
_POSSESSIVE = {"she": "her", "he": "his"}
_OBJECT = {"she": "her", "he": "him"}
_REFLEXIVE = {"she": "herself", "he": "himself"}
_CONTRACTED = {"'s": "'m", "'d": "'d", "'ll": "'ll", "'ve": "'ve"}
_FEMALE = word_set(
    "mother mum mom sister daughter wife aunt girlfriend grandmother grandma niece woman girl lady "
    "fiancee fiancée bride"
)
_MALE = word_set(
    "father dad brother son husband uncle boyfriend grandfather grandpa nephew man boy guy fiance fiancé groom"
)
_NEUTRAL = word_set(
    "parent child kid friend colleague boss manager teacher client partner doctor nurse neighbour neighbor "
    "classmate student customer coworker co-worker roommate landlord cousin spouse sibling guitarist singer "
    "counsellor counselor therapist lawyer owner tutor coach supervisor advisor director investor postdoc "
    "ex mediator consultant chef vet ceo"
)
#: Someone else who may be the subject of a clause between the user and a pronoun ("he wants someone to
#: sit with him": "him" is the user again).
_OTHER_SUBJECTS = word_set("someone somebody anyone anybody nobody everyone they")
#: First words of a clause after a comma that give it a subject of its own ("..., his children held"),
#: where a clause that starts with a verb goes on with the user ("..., asked her to keep it private").
_SUBJECT_STARTERS = word_set(
    "the a an my his her their our its this that these those they he she who which everyone someone"
)
#: Verbs after which "her" is the person ("make her ungrateful"), not a possessive.
_CAUSATIVE = word_set("make makes made making let lets letting")
#: Words after "her" that show it is an object ("asked her for"), not a possessive ("her son").
_AFTER_OBJECT = word_set("""to for with about at from by of on in into out up down off over back away again too and or but so
    that the a an this these those what how why when where if because as than like more anything something
    everything nothing all some any it its his her their my your would will can could should might must is
    was has had does did feel go do be cry know think stay leave come look wait see say only just now then
    still yet later enough alone very""")
_PREPOSITIONS = word_set("to for with about at from by of on against than told asked tell ask called")
_ADVERBS = word_set("""now still really also always never just often even only already actually sometimes usually finally
    rarely seldom barely hardly mostly""")
_CONJUNCTIONS = word_set("and but or then")
#: Third-person verbs that follow "and"/"but" with the user as subject ("... and feels alone").
_COORDINATED = word_set("""is has does doesn't isn't hasn't wants needs feels cares doubts thinks panics loves hates keeps
    knows tries says hopes worries fears misses blames asks tells goes gets takes makes works lives looks
    stays avoids wonders believes refuses regrets wishes plans dreads hides pretends seems sees finds
    spends sends studies cries sleeps eats drinks shouts apologises apologizes withdraws admits jokes
    reads writes calls checks drives plays""")
_IRREGULAR = {
    "is": "am",
    "isn't": "am not",
    "has": "have",
    "hasn't": "haven't",
    "does": "do",
    "doesn't": "don't",
    "was": "was",
    "wasn't": "wasn't",
    "says": "say",
    "goes": "go",
}
_ES = ("ches", "shes", "sses", "xes", "zes", "oes")


def _base_form(verb: str) -> str:
    """The verb after "I": "feels" -> "feel", "tries" -> "try", "is" -> "am" (other words unchanged)."""
    low = verb.lower()
    if low in _IRREGULAR:
        return _IRREGULAR[low]
    if not low.isalpha() or len(low) < 4 or low.endswith(("ss", "us", "is")) or not low.endswith("s"):
        return verb
    if low.endswith("ies"):
        return verb[:-3] + "y"
    if low.endswith(_ES):
        return verb[:-2]
    return verb[:-1]


@dataclass
class _Clause:
    """What the rewrite knows inside one clause (up to a comma or a semicolon) while it walks the words."""

    user_subject: bool = False  # the user is this clause's subject ("let him down": "him" is not the user)
    subject_since: bool = False  # someone else became a subject after the user ("someone to sit with him")
    other_person: bool = False  # a person of the user's gender (or unknown) was named earlier
    agree: bool = False  # the next verb follows a new "I"


#: Quantities before "of her" ("part of her wonders"): "her" is then the person, not a possessive.
_PART_OF = word_set("part some all most much none any each")


def _split_keeping_quotes(text: str) -> tuple[list[str], set[int]]:
    """``text`` as words and the text between them, each quotation one piece; and which are quotes."""
    pieces: list[str] = []
    last = 0
    for quote in _QUOTE.finditer(text):
        pieces.extend(_PIECE.findall(text[last : quote.start()]))
        pieces.append(quote.group(0))
        last = quote.end()
    pieces.extend(_PIECE.findall(text[last:]))
    return pieces, {i for i, p in enumerate(pieces) if _QUOTE.fullmatch(p)}


def _rewrite_en(text: str, voice: Voice) -> str:
    """``text`` with the user's name and pronouns in the first person (the rules: module docstring).

    Quotations are someone's own words and stay as they are ("her mother said 'drawing won't get you
    into medicine'"); they are kept as single pieces, so the clause around them is read as one.
    """
    g = voice.pronoun
    if not g and not voice.names:
        return text
    pieces, quoted = _split_keeping_quotes(text)
    people = (_FEMALE if g == "she" else _MALE if g == "he" else frozenset()) | _NEUTRAL
    words = [i for i, p in enumerate(pieces) if i not in quoted and _LETTERS.match(p)]
    clause = _Clause()
    user_last = False  # the last subject of the sentence was the user ("... and feels alone")
    for n, i in enumerate(words):
        piece = pieces[i]
        low = piece.lower().replace("’", "'")
        between = "".join(" " if k in quoted else pieces[k] for k in range(words[n - 1] + 1, i)) if n else ""
        if n and any(k in quoted for k in range(words[n - 1] + 1, i)):
            clause.agree = False  # "saying I 'humiliated' her son": the quotation held the verb
        if re.search(r"[.!?]\s", between) and piece[0].isupper():
            clause, user_last = _Clause(), False
        elif _CLAUSE_END.search(between) or "," in between:
            relative = "," in between and low in ("who", "which")
            starts_subject = low in _SUBJECT_STARTERS or (piece[0].isupper() and piece != "I")
            clause = _Clause(
                user_subject=clause.user_subject and "," in between and not starts_subject,
                other_person=clause.other_person and relative,
            )
        rest = "".join(" " if k in quoted else pieces[k] for k in range(i + 1, min(i + 4, len(pieces))))
        after = _NEXT.match(rest)
        nxt = after.group(1).lower() if after else ""
        prev = pieces[words[n - 1]].lower() if n and not between.strip() else ""
        prev2 = pieces[words[n - 2]].lower() if n > 1 else ""
        becomes_i = False
        if _name_at(voice, pieces, i):
            possessive = low.endswith("'s")
            pieces[i] = "my" if possessive else ("me" if prev in _PREPOSITIONS else "I")
            becomes_i = pieces[i] == "I"
        elif g and low == _SUBJECT[g]:
            pieces[i], becomes_i = "I", True
        elif g and "'" in low and low.split("'")[0] == _SUBJECT[g]:
            suffix = "'" + low.split("'", 1)[1]
            if suffix == "'s" and nxt in ("been", "got"):
                suffix = "'ve"
            pieces[i] = "I" + _CONTRACTED.get(suffix, suffix)
            clause.user_subject, clause.subject_since, user_last = True, False, True
        elif g and low == _REFLEXIVE[g]:
            pieces[i] = "myself"
        elif g and low in (_POSSESSIVE[g], _OBJECT[g]):
            part_of = prev == "of" and prev2 in _PART_OF  # "part of her wonders": the user's own part
            if g == "he":
                is_object = low == "him"
            else:
                is_object = (not nxt or nxt in _AFTER_OBJECT or part_of or prev in _CAUSATIVE) and not nxt[
                    :1
                ].isdigit()
            if is_object:
                keep = clause.user_subject and not clause.subject_since and not part_of
                pieces[i] = piece if keep else "me"
            elif not clause.other_person:
                pieces[i] = "My" if piece[0].isupper() else "my"
        elif clause.agree:
            if low not in _ADVERBS:
                pieces[i] = _base_form(piece)
                clause.agree = False
        elif low in _CONJUNCTIONS and user_last:
            k = n + 1
            while k < len(words) and pieces[words[k]].lower() in _ADVERBS:
                k += 1
            if k < len(words) and pieces[words[k]].lower() in _COORDINATED:
                pieces[words[k]] = _base_form(pieces[words[k]])
        elif low in _OTHER_SUBJECTS or low in ("she", "he"):
            clause.subject_since, user_last = True, False
        elif low in people:
            clause.other_person = True
        if becomes_i:
            clause.user_subject, clause.subject_since, clause.agree, user_last = True, False, True, True
    return "".join(pieces)


def _name_at(voice: Voice, pieces: list[str], i: int) -> bool:
    """Whether the word at ``i`` is the user's name (or its possessive)."""
    word = pieces[i].replace("’", "'")
    bare = word[:-2] if word.endswith("'s") else word
    return any(bare == name for name in voice.names if " " not in name)


# -- first person: Chinese ----------------------------------------------------------------------------
def _rewrite_zh(text: str, voice: Voice) -> str:
    """``text`` with the user's name and pronoun as 我 (not 他们/她们/其他, not inside quotations)."""
    parts = re.split(r"(['‘“「『][^'’”」』]*['’”」』])", text)
    for k in range(0, len(parts), 2):  # even parts are outside quotations
        part = parts[k]
        for name in voice.names:
            part = part.replace(name, "我")
        if voice.pronoun:
            part = re.sub(f"(?<![其吉]){voice.pronoun}(?![们人])", "我", part)
        parts[k] = part
    return "".join(parts)


def rewrite(text: str, voice: Voice, language: str) -> str:
    """``text`` said by the user itself (see the module docstring for what the rules can't resolve)."""
    return _rewrite_zh(text, voice) if language == "zh" else _rewrite_en(text, voice)
