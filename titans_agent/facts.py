"""Facts inside conversation text, without an LLM: clauses, the relation a clause states, questions.

A chat message often states several facts at once ("Hi! I'm Alice, I live in Boston and work as a
nurse.") and a later message changes one of them ("I moved to Seattle last week."). Knowledge
updates (:mod:`titans_agent.updates`) compare clause with clause, and a link between two records is
*about* the relations the two clauses share: the move above supersedes where Alice lives, not that
she is a nurse. Recall (:mod:`titans_agent.retrieval`) reads the same relations off a question
("Where do I live now?" asks about ``residence``) to decide whether a superseded record is stale for
that question, and demotes stored questions, which are weak answers.

Everything here is a pure function of text (English patterns; a text in another language simply
states no relation, and updates fall back to whole-record similarity).
"""

from __future__ import annotations

import re
from functools import lru_cache
from itertools import dropwhile, islice

from titans_agent.text import WORD, content_words, tokens

__all__ = [
    "ASSISTANT_ROLES",
    "RELATIONS",
    "RELATION_PATTERNS",
    "SUBJECT_HEAD_WORDS",
    "QUESTION_HEAD_WORDS",
    "TELLING_MIN_WORDS",
    "addresses_assistant",
    "asks_what_assistant_said",
    "asks_about_past",
    "clauses",
    "fact_subject",
    "is_question",
    "named_owners",
    "other_subjects",
    "query_relations",
    "relations",
    "reports_speech",
    "role_people",
    "same_subject",
    "shared_relations",
    "stated_relations",
    "states_relation",
    "third_parties",
]

_SENTENCE = re.compile(r"(?<=[.!?;:])\s+|\n+")
# "..., and I work as ...", "... but we moved ...", "..., I live in ...": a new clause with its own
# first-person subject.
_SUBJECT_JOIN = re.compile(
    r"(?:,\s*(?:(?:and|but|so|while|though|although|because)\s+)?|\s+(?:and|but|so|while|though|although|because)\s+)"
    r"(?=(?:i|i'm|i've|i'd|i'll|we|we're|we've|my|our)\b)",
    re.IGNORECASE,
)


MAX_CLAUSES = 64
"""The most clauses read of one text: a message states a few facts; a 100,000-character turn split
into thousands of clauses would make every comparison of two records quadratic."""


@lru_cache(maxsize=65536)
def _clauses(text: str) -> tuple[str, ...]:
    out: list[str] = []
    for sentence in _SENTENCE.split(text):
        sentence = " ".join(sentence.split())  # one space: the joins' patterns stay linear
        pieces = _SUBJECT_JOIN.split(sentence)
        out.extend(p.strip(" ,;") for p in pieces if p and p.strip(" ,;.!"))
        if len(out) >= MAX_CLAUSES:
            break
    return tuple(out[:MAX_CLAUSES])


def clauses(text: str) -> list[str]:
    """The clauses of ``text``: its sentences, each split again before a conjunction or comma that
    opens a new first-person subject ("I'm a nurse and I live in Lyon" -> two clauses); empty pieces
    dropped, order kept, whitespace runs read as one space, at most :data:`MAX_CLAUSES`."""
    return list(_clauses(text))


_PROFESSIONS = (
    "nurse|doctor|physician|surgeon|dentist|pharmacist|paramedic|therapist|psychologist|teacher|professor|"
    "lecturer|tutor|student|engineer|developer|programmer|designer|architect|lawyer|attorney|paralegal|"
    "accountant|analyst|consultant|manager|director|founder|ceo|cto|chef|cook|baker|barista|waiter|waitress|"
    "bartender|cashier|clerk|librarian|journalist|writer|(?<!code )(?<!text )(?<!my )editor|author|photographer|artist|"
    "musician|actor|"
    "actress|pilot|driver|mechanic|electrician|plumber|carpenter|farmer|scientist|researcher|biologist|"
    "chemist|physicist|economist|banker|broker|realtor|salesman|saleswoman|recruiter|receptionist|"
    "secretary|assistant|intern|freelancer|contractor|firefighter|officer|soldier|veterinarian|vet|"
    "caregiver|nanny|translator|interpreter|coach|trainer|technician|administrator|sysadmin|"
    "entrepreneur|retiree|unemployed|retired|self-employed|mathematician|statistician|marketer|planner"
)

RELATION_PATTERNS: dict[str, re.Pattern[str]] = {
    "residence": re.compile(
        r"\b(live|lives|(?<!for a )living|lived|reside|resides|residing|relocat\w*|settled|"
        r"(?:moved|move|moving)(?!\s+(?:the|a|an|it|this|that|these|those|his|her|their|its|my|your|some|all)\b)|"
        r"based in|hometown|home town|apartment|flat|neighbou?rhood|house|condo|address)\b",
        re.IGNORECASE,
    ),
    "work": re.compile(
        r"\b(work|works|working|worked|job|jobs|employer|employed|career|hired|quit|resign\w*|"
        r"position|promot\w*|company|firm|office|shifts?|profession|occupation|retire\w*|restaurant|bakery|"
        r"cafe|shop|store|business|startup|studio|clinic|hospital|agency|lab|factory|salon|"
        rf"{_PROFESSIONS})\b",
        re.IGNORECASE,
    ),
    "study": re.compile(
        r"\b(study|studies|studying|studied|student|major|majoring|degree|university|college|"
        r"school|course|phd|masters?|bachelors?|graduat\w*|enrol\w*|semester|thesis)\b",
        re.IGNORECASE,
    ),
    "name": re.compile(
        r"\b(call me|my name|name's|named|go by|nickname)\b|^(?:hi|hello|hey)\b[!,. ]+(?:i'm|i am|this is)\s+[A-Z]",
        re.IGNORECASE,
    ),
    "diet": re.compile(
        r"\b(vegetarian|vegan|pescatarian|diet|meat|gluten|keto|lactose|dairy|eat|eating|ate|food|"
        r"allergic|allergy|allergies)\b",
        re.IGNORECASE,
    ),
    "drink": re.compile(
        r"\b(drink|drinks|drinking|coffee|espresso|tea|latte|cappuccino|beer|wine|alcohol|sober|caffeine|"
        r"decaf|juice|soda)\b",
        re.IGNORECASE,
    ),
    "pet": re.compile(
        r"\b(dog|dogs|puppy|cat|cats|kitten|pet|pets|hamster|parrot|rabbit|fish tank|beagle|labrador|terrier|"
        r"poodle|retriever|spaniel|tabby)\b",
        re.IGNORECASE,
    ),
    "rent": re.compile(r"\b(rent|rents|mortgage|landlord|landlady)\b", re.IGNORECASE),
    # "drive" as a verb: lowercase, or capitalised only where a clause starts ("Elm Drive" is a street)
    "vehicle": re.compile(
        r"\b(car|(?-i:drive|drives|driving)|motorbike|motorcycle|scooter|truck|suv|ev)\b|^\W*(?-i:Driv(?:e|es|ing))\b",
        re.IGNORECASE,
    ),
    "device": re.compile(r"\b(phone|iphone|android|laptop|macbook|pixel|tablet|ipad)\b", re.IGNORECASE),
    "relationship": re.compile(
        r"\b(married|marry|engaged|divorc\w*|single|dating|broke up|breakup|wedding|fianc[eé]e?)\b", re.IGNORECASE
    ),
    "hobby": re.compile(
        r"\b(hobby|hobbies|play|plays|playing|learning|practis\w*|practic\w*|guitar|piano|violin|cello|drums|"
        r"running|climbing|yoga|swimming|painting|knitting|chess|gym|marathon)\b",
        re.IGNORECASE,
    ),
}
"""What a clause can be about, by its words: where one lives, what it costs (rent), where one works,
studies, what one is called, eats, drinks, keeps, drives, uses, whom one is with, what one does for
fun. A clause may match several (``"we moved for my new job"``); one that matches none states no
known relation."""


@lru_cache(maxsize=65536)
def relations(clause: str) -> frozenset[str]:
    """The relations (keys of :data:`RELATION_PATTERNS`) whose words ``clause`` has."""
    return frozenset(key for key, pattern in RELATION_PATTERNS.items() if pattern.search(clause))


_MONTHS_DAYS = (
    "january|february|march|april|may|june|july|august|september|october|november|december|"
    "monday|tuesday|wednesday|thursday|friday|saturday|sunday|spring|summer|autumn|fall|winter"
)
_IN_PLACE = re.compile(rf"\b(?:in|from)\s+(?!(?i:{_MONTHS_DAYS})\b)[A-Z][\w'-]+", re.UNICODE)


@lru_cache(maxsize=65536)
def stated_relations(clause: str) -> frozenset[str]:
    """:func:`relations`, and ``residence`` for a clause that places the speaker "in" or "from" a
    capitalised name that is no month or day ("Hi, I'm Maya, a teacher in Denver"): how a chat
    introduction says where one lives. Used for statements, never for the clause that announces a
    change (which needs a word of moving)."""
    found = relations(clause)
    if "residence" not in found and _IN_PLACE.search(clause):
        found = found | {"residence"}
    return found


def shared_relations(old: str, new: str) -> frozenset[str]:
    """The relations both texts state, over all their clauses."""
    a: frozenset[str] = frozenset().union(*(relations(c) for c in clauses(old)))
    b: frozenset[str] = frozenset().union(*(relations(c) for c in clauses(new)))
    return a & b


_WH = frozenset("what where when who whom whose why how which".split())
_AUXILIARY = re.compile(
    r"\W*(?:do|does|did|is|are|am|was|were|can|could|would|will|should|shall|may|might|must|have|has)\s+"
    r"(?:i|you|we|they|he|she|it|my|your|our|there|anyone|u)\b",
    re.IGNORECASE,
)


_TAG_QUESTION = re.compile(r",?\s*(?:and|what|how)\s+about\s+you\s*\??\s*$|,\s*and\s+you\s*\??\s*$", re.I)
_RELATIVE = re.compile(r"\W*(?:when|where|what|which|how|why)\s+(?:i|i'm|i've|we|we're|my|our|is why)\b", re.I)


def _asks(clause: str) -> bool:
    """A clause asks when it ends with "?", opens with a question word ("where do i live again"), or
    opens with an auxiliary before its subject ("do you remember my job", "is my rent due"). A
    statement with a tag ("I live in Seattle, what about you?") or opening with a relative clause
    ("When I turned 30 I moved ...", "Which is why I live here.") does not ask."""
    if _TAG_QUESTION.search(clause):
        clause = _TAG_QUESTION.sub("", clause)
        if not clause.strip():
            return True
        return _asks(clause + ".")
    if clause.rstrip().endswith("?"):
        return True
    if _RELATIVE.match(clause):
        return False
    if clause.rstrip().endswith("!"):  # "What a day!"
        return False
    first = re.match(r"\W*(\w+)", clause)
    return bool(first and first.group(1).lower() in _WH) or bool(_AUXILIARY.match(clause))


@lru_cache(maxsize=65536)
def is_question(text: str) -> bool:
    """Whether ``text`` asks rather than states: a clause of it asks (ends with "?", or opens with a
    question word or an auxiliary before its subject: chat often drops the "?") and none states one
    of the speaker's own facts (:func:`states_relation`). A clause that tells about the speaker at
    some length (first-person words and at least :data:`TELLING_MIN_WORDS` content words) makes it a
    statement too, unless the question asks about the speaker's own facts (a first-person word in
    its first :data:`QUESTION_HEAD_WORDS` words: "What's my job title again? I need it for my
    LinkedIn profile tonight." asks). "Where do I live now?", "where do i live again lol" and "What
    car do I have? Insurance is asking." ask; "I moved to Seattle last week. Where should I eat?"
    and "I'm having trouble with my home network's storage. Can you recommend a NAS?" state: the
    second is how users of an assistant tell it their circumstances and preferences."""
    asks = tells = about_speaker = False
    for part in clauses(text):
        if not any(ch.isalnum() for ch in part):
            continue
        if _asks(part):
            asks = True
            about_speaker = about_speaker or not _HEAD_SELF.isdisjoint(tokens(part)[:QUESTION_HEAD_WORDS])
        elif _states(part, frozenset(RELATION_PATTERNS)):
            return False
        elif _tells(part):
            tells = True
    return asks and (about_speaker or not tells)


TELLING_MIN_WORDS = 5
"""Content words (:func:`titans_agent.text.content_words`) from which a first-person clause that
does not ask tells something about the speaker (:func:`is_question`). Chosen on the agent-loop
benchmark's development users: at 3 a short reason given with a question about oneself ("I'm
filling in a form") made the question a statement, and stored questions outranked their answers."""

QUESTION_HEAD_WORDS = 5
"""A question with a first-person word (I, my) among its first this many words asks about the
speaker's own facts ("Where do I live", "What's my job title", "Do you remember my job"); one
with it later ("Can you give me some tips on how to organise my week") is a request for help."""

_HEAD_SELF = frozenset({"i", "my", "mine", "myself"})


def _tells(clause: str) -> bool:
    words = set(re.findall(r"[\w']+", clause.lower()))
    return not _SELF.isdisjoint(words) and content_words(clause) >= TELLING_MIN_WORDS


_QUERY_RELATIONS: dict[str, re.Pattern[str]] = {
    "residence": re.compile(
        r"\b(where(?:\W+\w+){0,6}?\W+(?:live|living|stay|staying|based|home)|city|town|country|address)\b", re.I
    ),
    "work": re.compile(r"\b(job|work|working|occupation|profession|employer|company|career|for a living)\b", re.I),
    "study": re.compile(r"\b(study|studying|major|degree|school|university|college)\b", re.I),
    "name": re.compile(r"\b(my name|call me|called)\b", re.I),
}


def query_relations(query: str) -> frozenset[str]:
    """The relations a question asks about: the clause relations of the query's words, and a few
    question forms that name a relation without its words ("What city am I in?", "What do I do for
    a living?")."""
    found = set(relations(query))
    found.update(key for key, pattern in _QUERY_RELATIONS.items() if pattern.search(query))
    return frozenset(found)


_SELF = frozenset({"i", "i'm", "i've", "i'd", "i'll", "my", "me", "mine", "we", "our", "ours", "us"})


@lru_cache(maxsize=65536)
def states_relation(text: str, asked: frozenset[str]) -> bool:
    """Whether ``text`` has a clause in which the speaker states one of the relations ``asked``:
    first-person words, a relation word, and not a question ("Hi! I'm a nurse and I live in Lyon."
    states ``work`` and ``residence``; "Do you like your job?" states nothing)."""
    return any(_states(c, asked) and not _asks(c) for c in clauses(text))


def _states(clause: str, asked: frozenset[str]) -> bool:
    words = set(re.findall(r"[\w']+", clause.lower()))
    return not asked.isdisjoint(stated_relations(clause)) and not _SELF.isdisjoint(words)


ASSISTANT_ROLES = frozenset({"assistant", "ai", "bot", "chatbot", "model", "system", "tool"})
"""Role names (casefolded) of the machine's side of a chat: what the middleware, LangChain and the
common chat formats call the assistant."""

_YOU = re.compile(
    r"\b(you|your|yours|you're|you've|you'd|yourself)\b|"
    r"\b(?:was|were)\s+(?:suggested|recommended|given|told|advised|proposed)\b",
    re.IGNORECASE,
)


def addresses_assistant(query: str) -> bool:
    """Whether ``query`` addresses the assistant ("What did you recommend?", "Remind me of
    your tip", "What name was suggested for my bakery?", "Can you remind me where I live?"):
    second-person words, or a passive of suggesting, recommending, giving or telling."""
    return bool(_YOU.search(query))


_SAID_PAST = (
    r"(?:mentioned|said|suggested|recommended|told|provided|gave|given|listed|shared|wrote|written|proposed|named|"
    r"described|explained|came up with|offered|advised|pointed out)"
)
_SAID_PRESENT = (
    r"(?:mention|say|suggest|recommend|tell|provide|give|list|share|write|propose|name|describe|explain|"
    r"come up with|offer|advise|point out)"
)
_ASSISTANT_SAID = re.compile(
    r"\b(?:you(?:'ve|'d|\s+have|\s+had)?(?:\s+(?:just|also|once|previously|earlier|kindly|briefly))?\s+"
    + _SAID_PAST
    + r"|did\s+you\s+(?:\w+\s+)?"
    + _SAID_PRESENT
    + r"|your\s+(?:\w+\s+)?(?:suggestion|recommendation|advice|tip|answer|reply|list|idea)s?)\b",
    re.IGNORECASE,
)


# "did you say my job was ...", "you said I live in ...", "what did you tell me my job was", "what did
# you say about my job": what was said is the user's own fact
_SAID_OF_ME = re.compile(
    r"\b(?:" + _SAID_PAST + "|" + _SAID_PRESENT + r")\s+(?:me\s+)?(?:that\s+|about\s+|of\s+)?"
    r"(?:i|i'm|i've|i'd|i'll|my|mine)\b",
    re.IGNORECASE,
)


def asks_what_assistant_said(query: str) -> bool:
    """Whether ``query`` asks what the assistant said: "What book did you recommend?", "You
    mentioned a light beer, which one?", "Remind me of your last tip"; not a request ("Can you
    suggest some activities?"), "Do you remember where I live?", a passive ("What diet was
    recommended by my doctor?": said by whom?), nor what the assistant said of the user's own facts
    ("What did you say my job was?", "You said I live in Paris, right?": the user's statement is
    the source). Narrower than :func:`addresses_assistant`: the answer is the assistant's own turn,
    and the user's request that it answers is the echo (recall demotes it)."""
    return bool(_ASSISTANT_SAID.search(query)) and not _SAID_OF_ME.search(query)


_PAST = re.compile(
    r"\b(did|was|were|had|used to|before|previously|formerly|originally|earlier|ago|last (?:year|month|week|time)|"
    r"first|back then|in the past|history)\b",
    re.IGNORECASE,
)
_PRESENT = re.compile(
    r"\b(now|currently|current|these days|nowadays|today|still|at the moment|anymore)\b", re.IGNORECASE
)


def asks_about_past(query: str) -> bool:
    """Whether ``query`` asks what was true at some earlier time ("When did I move to Seattle?",
    "Where did I live before?") rather than what is true now ("Where do I live now?"): a past or
    time word and no present one. Recall does not demote superseded records for such a question:
    what was true then is the answer."""
    return bool(_PAST.search(query)) and not _PRESENT.search(query)


RELATIONS = frozenset(
    """aunt boss boyfriend brother child children colleague colleagues cousin coworker dad daughter family
    father friend friends girlfriend grandfather grandma grandmother grandpa husband kid kids mom mother mum
    neighbor neighbour neighbours neighbors parents partner roommate sister son uncle wife""".split()
)
"""Words naming another person: a statement that mentions one is about that person, not the speaker."""

_POSSESSIVE = re.compile(r"\b(\w+)['\u2019]s\b", re.UNICODE)
_NAME_POSSESSIVE = re.compile(r"\b([A-Z]\w+)['\u2019]s\b")
_NOT_POSSESSORS = frozenset("it that he she what there here who let this where how everyone nobody".split())


@lru_cache(maxsize=65536)
def third_parties(text: str) -> frozenset[str]:
    """Who else a statement mentions: relation words ("sister") and possessors ("Sam's"), lowercased;
    contractions ("it's", "that's", "he's") are not possessors."""
    words = set(WORD.findall(text.lower()))
    owners = {m.lower() for m in _POSSESSIVE.findall(text)} - _NOT_POSSESSORS
    return frozenset((words & RELATIONS) | owners)


def named_owners(text: str) -> frozenset[str]:
    """Capitalised possessors, lowercased ("Marc's car": ``{"marc"}``): a possessive of a thing or a
    role ("the network's", "the doctor's advice") names no one; "It's", "Let's" are not possessors."""
    return frozenset(m.lower() for m in _NAME_POSSESSIVE.findall(text)) - _NOT_POSSESSORS


SUBJECT_HEAD_WORDS = 4
"""The words of a clause (after an opener such as "Oh," or "Also") read for its subject by
:func:`other_subjects`: "My friend Sam swears by Vim", "My partner's manager is Priya"."""

_OPENERS = frozenset("oh ah well also and but so then btw actually anyway plus hey hi hello ok okay yes yeah".split())
_SPEAKER_SUBJECTS = frozenset("i i'm i've i'd i'll im ive we we're we've we'd we'll".split())
_THIRD_PRONOUNS = frozenset("he she he's she's".split())
_HEAD_WORD = re.compile(r"[\w']+")
# "..., she likes gardening": a clause of its own with a third-person subject
_PRONOUN_JOIN = re.compile(r",\s*(?:(?:and|but|so)\s+)?(?=(?:he|she)\b)|\s+(?:and|but)\s+(?=(?:he|she)\b)", re.I)


@lru_cache(maxsize=65536)
def other_subjects(text: str) -> frozenset[str]:
    """The other people a text is about as the subject of one of its clauses (:func:`clauses`, split
    again before "he"/"she"), lowercased: a relation word, a capitalised possessor or "he"/"she"
    among the clause's first :data:`SUBJECT_HEAD_WORDS` words, before any first-person subject ("My
    sister lives at 12 Oak St.": ``{"sister"}``; "Jonas, my boyfriend, says hi": ``{"boyfriend"}``;
    "I need a gift for my sister, she likes gardening": ``{"sister"}``, the people the text names
    standing for "he" or "she", the pronoun itself where it names none). A person after the speaker's
    own subject or in a clause's object does not count: "I went hiking with my friends", "Relocated
    to Vancouver for my partner's job" and "I'm looking for books for kids" are about the speaker,
    where :func:`third_parties` names the friends, the partner and the kids; so does a possessive of
    a thing ("my home network's storage")."""
    found: set[str] = set()
    for clause in clauses(text):
        for piece in _PRONOUN_JOIN.split(clause):
            found_words = (m.group() for m in _HEAD_WORD.finditer(piece.replace("\u2019", "'")))
            words = islice(dropwhile(lambda w: w.lower() in _OPENERS, found_words), SUBJECT_HEAD_WORDS)
            for i, word in enumerate(words):
                low = word.lower()
                if low in _SPEAKER_SUBJECTS:
                    break
                bare = low[:-2] if low.endswith("'s") else low
                if bare in RELATIONS:
                    found.add(bare)
                elif i == 0 and low in _THIRD_PRONOUNS:  # whom the text names, else the pronoun
                    found.update(third_parties(text) or {bare})
                elif low.endswith("'s") and word[0].isupper() and bare not in _NOT_POSSESSORS:
                    found.add(bare)
    return frozenset(found)


# A statement about someone named at its start: "The user lives in Paris.", "User moved to Berlin.",
# "Alice works as a nurse." (how an application or a model writes notes about a person).
_NAMED_SUBJECT = re.compile(
    r"\W*(?:[Tt]he\s+)?(?P<name>user|customer|client|patient|member|[A-Z][\w-]*)(?!['\u2019]s)\s+"
    r"(?!(?:for|in|at|on|with|from|to|of|since|and|or|but|as|by)\b)(?=[a-z])"
)
_NOT_SUBJECTS = frozenset(
    "i the a an my our your his her their hi hey hello ok okay yes no so well also and but then now "
    "today tonight yesterday tomorrow recently finally just big update note fyi btw news it this that "
    "there here they he she we you".split()
)


@lru_cache(maxsize=65536)
def fact_subject(clause: str) -> str | None:
    """Whom a statement names as its subject at its start, lowercased: ``"user"`` for "The user
    moved to Berlin." or "User lives in Paris.", ``"alice"`` for "Alice works as a nurse."; None
    for anything else (first person, a pronoun, a question, a possessive such as "The user's
    company ...", which is about the company, a sentence opener such as "Today ..." or "Vegan for
    five years"). Two statements about one named subject can update each other as the speaker's
    own statements do (:mod:`titans_agent.updates`)."""
    m = _NAMED_SUBJECT.match(clause)
    if m is None or "?" in clause:
        return None
    name = m.group("name").lower()
    return None if name in _NOT_SUBJECTS else name


def same_subject(old: str, new: str) -> bool:
    """Whether both texts state a fact of one subject named at a clause's start ("The user lives in
    Paris." and "The user moved to Berlin."; :func:`fact_subject`)."""
    named = {fact_subject(c) for c in clauses(old)} - {None}
    return bool(named) and not named.isdisjoint(fact_subject(c) for c in clauses(new))


# a role after a possessive names a person ("my manager is Priya"); after an article it is the
# speaker's own role ("I started as a product manager")
_ROLE_PERSON = re.compile(
    r"\b(?:my|our|his|her|their)\s+(?:new\s+|old\s+)?(manager|supervisor|landlord|landlady|doctor|teacher|"
    r"coach|therapist|lawyer|mentor|tutor|dentist|trainer|advisor|adviser)\b",
    re.IGNORECASE,
)
_REPORTED = re.compile(r"\b(said|says|told|tells|thinks|thought|heard|mentioned|claims|claimed)\b", re.IGNORECASE)


def role_people(text: str) -> frozenset[str]:
    """The roles a text names as people, after a possessive ("my manager is Priya": ``{"manager"}``),
    lowercased; a role after an article is one's own ("I started as a product manager": none)."""
    return frozenset(m.lower() for m in _ROLE_PERSON.findall(text))


def reports_speech(text: str) -> bool:
    """Whether ``text`` reports what someone said or thinks ("Alice said Bob moved to Berlin."): a
    fact in it is not necessarily the subject's."""
    return _REPORTED.search(text) is not None
