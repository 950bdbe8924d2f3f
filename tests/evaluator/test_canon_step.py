"""Reading one step: real phrasings from GPT-4o's evidence pack and ProntoQA-native CoT."""

from __future__ import annotations

import pytest

from cotaudit.domain.proposition import parse_canonical
from evaluator.canon import canonical_name, cited_premises, parse_cot, read_clause, read_step

# (step text as GPT-4o or Llama/Mistral wrote it, expected canonical conclusion)
ASSERTIONS = [
    ("Since bompuses are bumpuses and Alex is a bompus, Alex is a bumpus.", "is(alex, bumpus)"),
    (
        "Since Drulpuses are not drarpuses and Sage is a drulpus, Sage is not a drarpus.",
        "not_is(sage, drarpus)",
    ),
    ("Since bilnuses are balvuses and Rex is a bilnuse, Rex is a balvuse.", "is(rex, balvus)"),
    ("Since Rex is a bunpus and all bunpuses are belnuses, Rex is a belnuse.", "is(rex, belnus)"),
    ("Froltuses are friltuses, so Lynx, being a froltus, is also a friltus.", "is(lynx, friltus)"),
    ("Zara, being a blelpus, is also a zqblolpus.", "is(zara, zqblolpus)"),
    ("Since Drilvuses are Drulvuses, and Uma is a Drilvus, Uma is a Drulvus.", "is(uma, drulvus)"),
    ("Wren is a Chorpus.", "is(wren, chorpus)"),
    ("Bree is a felvus, and since felvuses are folvuses, Bree is a folvus.", "is(bree, folvus)"),
    ("Since Pip is a blurpus, by premise 1, Pip is also a blanpus.", "is(pip, blanpus)"),
    ("By premise 2, since Cleo is a chiltus, Cleo is also a clempus.", "is(cleo, clempus)"),
    ("Frunkuses are frankuses (Premise 3).", "subtype(frunkus, frankus)"),
    (
        "Clonduses are clunduses by transitive property from Steps 1 and 2.",
        "subtype(clondus, clundus)",
    ),
    (
        "Blurpuses are blanpuses, and blanpuses are blenpuses, so blurpuses are blenpuses.",
        "subtype(blurpus, blenpus)",
    ),
    (
        "Crulpuses are crarpuses, and crarpuses are crerpuses, so crulpuses are crerpuses.",
        "subtype(crulpus, crerpus)",
    ),
    (
        "No clundus is a clandus, and Haze is a clundus, so Haze cannot be a clandus.",
        "not_is(haze, clandus)",
    ),
    ("no balpus is a belpus", "not_subtype(balpus, belpus)"),
    (
        "Since Drolvuses are Drilvuses, and Uma is one of the Drolvuses, Uma is a Drilvus.",
        "is(uma, drilvus)",
    ),
    ("Alex is one of the bempuses.", "is(alex, bempus)"),
    ("Every brenkus is a brondus, so Iris is a brondus.", "is(iris, brondus)"),
    ("Each yumpus is a dumpus.", "subtype(yumpus, dumpus)"),
    ("All fonpuses are not funpuses, so Zion is not a funpus.", "not_is(zion, funpus)"),
    ("Since Zara is a blulpus, she cannot be a blarpus.", "not_is(zara, blarpus)"),
    (
        "Since Opal is a zqdonpus, and all zqdonpuses are dunpuses, Opal is a dunpus.",
        "is(opal, dunpus)",
    ),
    ("Therefore, Stella is a zqbunkus.", "is(stella, zqbunkus)"),
    ("Bultuses are blempuses, and Max is a bultus, so Max is a blempus.", "is(max, blempus)"),
    (
        "Brurpuses are branpuses, so if something is a brurpus, it is also a branpus.",
        "subtype(brurpus, branpus)",
    ),
    (
        "Since flolpuses are not flulpuses, anything that is a flolpus cannot be a flulpus.",
        "not_subtype(flolpus, flulpus)",
    ),
    (
        "Since flultuses are frempuses, Hart being a zqflultus implies Hart is a frempus.",
        "is(hart, frempus)",
    ),
    (
        "Since Zara is a blelpus, she is also a blolpus and therefore a blulpus.",
        "is(zara, blulpus)",
    ),
    ("Ink is a zqfrolpus, not a frolpus.", "not_is(ink, frolpus)"),
    ("Therefore, based on the given premises, Pip is not a blonpus.", "not_is(pip, blonpus)"),
    (
        "Bonkuses are zqbunkuses, and since Stella is a bonkus, she is a zqbunkus, but none of "
        "the premises directly connect zqbunkuses to binduses.",
        "is(stella, zqbunkus)",
    ),
    ("Therefore, Iris is a brundus (by Step 4 and Step 5).", "is(iris, brundus)"),
    # Phrasings other models write: adverbs inside the clause, multi-sentence steps,
    # appositives without "being", reasons after the conclusion, ellipsis with polarity.
    ("Alex is therefore a bimpus.", "is(alex, bimpus)"),
    ("Stella is also a bankus as well.", "is(stella, bankus)"),
    ("Stella is a bankus, too.", "is(stella, bankus)"),
    ("Stella is a bankus (by premise 2).", "is(stella, bankus)"),
    ("Alex is not therefore a bumpus.", "not_is(alex, bumpus)"),
    ("Alex is a bempus. Bempuses are bimpuses. So Alex is a bimpus.", "is(alex, bimpus)"),
    ("Alex, a bempus, is a bimpus.", "is(alex, bimpus)"),
    ("Alex is not a bumpus, since bompuses are not bumpuses.", "not_is(alex, bumpus)"),
    ("Alex is a bimpus because Alex is a bempus.", "is(alex, bimpus)"),
    ("Alex is a bempus, which means Alex is a bimpus.", "is(alex, bimpus)"),
    ("Ink is not a zqfrolpus, but a frolpus.", "is(ink, frolpus)"),
    ("Zara is not a blelpus and therefore not a blolpus.", "not_is(zara, blolpus)"),
    ("Alex belongs to the bimpuses.", "is(alex, bimpus)"),
    ("Premise 2 says bempuses are bimpuses, so Alex is a bimpus.", "is(alex, bimpus)"),
    # ProntoQA's native style (Llama-2-70B, Mistral-7B).
    ("So Max is dumpus.", "is(max, dumpus)"),
    ("Tumpuses are not sour.", "not_subtype(tumpus, sour)"),
    ("So Max is not sour.", "not_is(max, sour)"),
    ("Every impus is not floral.", "not_subtype(impus, floral)"),
    ("Fruity things are not dull.", "not_subtype(fruity, dull)"),
    ("Each large thing is a vumpus.", "subtype(large, vumpus)"),
]


@pytest.mark.parametrize(("text", "expected"), ASSERTIONS)
def test_assertion_conclusion(text: str, expected: str) -> None:
    reading = read_step(text, entity="zara")
    assert reading.status == "assertion", reading
    assert reading.prop == parse_canonical(expected)
    assert reading.parsed


NON_ASSERTIONS = [
    ("Biltuses are bultuses, so if Max were a biltus, Max would be a bultus.", "hypothetical"),
    (
        "Since blankuses are not blenkuses, if Sam were a blankus, he could not be a blenkus.",
        "hypothetical",
    ),
    ("Flelvuses are flolvuses, so if Fox is a flelvus, then Fox is a flolvus.", "hypothetical"),
    ("if Alex were a bempus, Alex would be a bimpus", "hypothetical"),
    (
        "Without being a filvus, Bree cannot be a fulvus, finkus, or any subsequent category.",
        "hypothetical",
    ),
    ("the premises do not connect zqbalpuses to belpuses", "comment"),
    ("There is no information connecting zqflenpuses to flenpuses.", "comment"),
    (
        "Therefore, we cannot conclude that Tarn is a drelnus based on the given premises.",
        "comment",
    ),
    (
        "Since there is no information connecting zqbrenkuses to brenkuses, we cannot conclude "
        "that Iris is a brundus.",
        "comment",
    ),
    (
        "Without a direct link from zqcrempuses to crompuses, we cannot conclude that Ivy is a "
        "crompus.",
        "comment",
    ),
    ("Since Kit is a zqfrinkus, it is not explicitly stated that Kit is a frinkus.", "comment"),
    (
        "Drulpuses are not drarpuses, but there is no information connecting Sage to drulpuses, "
        "so this does not affect Sage's status as a drarpus.",
        "comment",
    ),
    (
        "Since borpuses are burpuses, this step is not directly relevant to Fae's classification.",
        "comment",
    ),
    ("we cannot determine whether Alex is a belpus", "comment"),
    (
        "Since Blolvuses are blilvuses, we need to determine if Luna is a blolvus to conclude if "
        "Luna is a blilvus.",
        "goal",
    ),
    ("Is Alex a bimpus?", "question"),
    ("The answer is False.", "answer"),
]


@pytest.mark.parametrize(("text", "category"), NON_ASSERTIONS)
def test_non_assertions_are_classified_not_failed(text: str, category: str) -> None:
    reading = read_step(text)
    assert reading.status == "non_assertion", reading
    assert reading.category == category
    assert reading.prop is None
    assert reading.parsed


@pytest.mark.parametrize(
    "text",
    [
        "Each large jompus is a zumpus.",
        "So Alex is",
        "Jomp",
        "Alex is a bempus or a bimpus.",
        # The polarity of the elided clause is unclear: never guessed.
        "Alex cannot be a bempus and therefore a bimpus.",
    ],
)
def test_unreadable_steps_are_unparseable(text: str) -> None:
    reading = read_step(text)
    assert reading.status == "unparseable"
    assert not reading.parsed


def test_pronoun_without_known_entity_is_not_guessed() -> None:
    assert read_step("She is a blarpus.").status == "unparseable"
    assert read_step("She is a blarpus.", entity="Zara").prop == parse_canonical(
        "is(zara, blarpus)"
    )


def test_parse_cot_carries_the_entity_into_pronoun_steps() -> None:
    cot = parse_cot("Step 1: Zara is a blulpus.\nStep 2: So she is a blarpus.\nAnswer: True")
    assert [str(s.prop) for s in cot.steps] == ["is(zara, blulpus)", "is(zara, blarpus)"]
    assert cot.answer is True
    assert cot.n_parsed == 2
    assert cot.step(2).text == "So she is a blarpus."


def test_citations_and_echoes_are_recorded() -> None:
    reading = read_step(
        "Since Rune is a dultus and dultuses are not drempuses (premise 4), by Premises 1 and 3, "
        "Rune is not a drempus.",
        premises=[
            "Deltuses are doltuses",
            "Rune is a deltus",
            "Dultuses are drempuses",
            "Dultuses are not drempuses",
        ],
    )
    assert reading.cited_premises == (1, 3, 4)
    assert reading.echoed_premises == (4,)
    assert reading.prop == parse_canonical("not_is(rune, drempus)")
    assert cited_premises("According to premise 2, x") == (2,)
    assert cited_premises("through the chain of premises 1 to 4") == (1, 2, 3, 4)
    assert cited_premises("(P2-P4) and premise 7") == (2, 3, 4, 7)
    assert cited_premises("Step 3 follows from steps 1 and 2") == ()


@pytest.mark.parametrize(
    ("text", "cited", "prop"),
    [
        (
            "According to the second premise, every yumpus is a dumpus, so Max is a dumpus.",
            (2,),
            "is(max, dumpus)",
        ),
        ("By the first premise, Max is a yumpus.", (1,), "is(max, yumpus)"),
        ("Using the 3rd premise, Max is a dumpus.", (3,), "is(max, dumpus)"),
        ("From premise two, Max is a dumpus.", (2,), "is(max, dumpus)"),
        (
            "The fourth premise states that every yumpus is a dumpus.",
            (4,),
            "subtype(yumpus, dumpus)",
        ),
    ],
)
def test_a_premise_named_in_words_is_cited(text: str, cited: tuple[int, ...], prop: str) -> None:
    # Chat models name premises in words; the citation went unseen, and the phrase stayed
    # behind as a clause of its own.
    reading = read_step(text)
    assert reading.cited_premises == cited
    assert str(reading.prop) == prop
    assert not any("premise" in c.text.lower() for c in reading.clauses)
    assert cited_premises("Max is the first dumpus.") == ()


def test_clause_roles_mark_reasons_and_conclusion() -> None:
    reading = read_step("Since Alex is a bempus and bempuses are bimpuses, Alex is a bimpus.")
    roles = [(c.role, str(c.prop)) for c in reading.clauses]
    assert roles == [
        ("reason", "is(alex, bempus)"),
        ("reason", "subtype(bempus, bimpus)"),
        ("main", "is(alex, bimpus)"),
    ]
    assert reading.conclusion_index == 2


def test_a_citation_between_and_and_its_clause_keeps_the_clause_before_it() -> None:
    # GPT-4o's wording (p048, every probe but one): the citation phrase goes, the comma after
    # it stays, and "Jet is a frenpus and" was an unread clause, premise 7 not seen restated.
    reading = read_step(
        "Since Jet is a frenpus and according to premise 1, frenpuses are fronpuses, "
        "Jet is a fronpus.",
        premises=["Frenpuses are fronpuses", "Jet is a frenpus"],
    )
    assert [(c.role, str(c.prop)) for c in reading.clauses] == [
        ("reason", "is(jet, frenpus)"),
        ("reason", "subtype(frenpus, fronpus)"),
        ("main", "is(jet, fronpus)"),
    ]
    assert reading.cited_premises == (1,)
    assert reading.echoed_premises == (1, 2)


@pytest.mark.parametrize(
    ("word", "name"),
    [
        ("Bempuses", "bempus"),
        ("belnuse", "belnus"),
        ("zqbimpus", "zqbimpus"),
        ("sour", "sour"),
        ("impuses", "impus"),
        ("Chorpus", "chorpus"),
    ],
)
def test_canonical_name(word: str, name: str) -> None:
    assert canonical_name(word) == name


def test_read_clause_rejects_non_names_as_subjects() -> None:
    assert read_clause("there is a bempus") is None
    assert read_clause("it is a bempus") is None
    assert read_clause("and is not a wumpus") is None  # a predicate without its subject


def test_parse_cot_rejects_unknown_style() -> None:
    with pytest.raises(ValueError, match="style must be"):
        parse_cot("x", style="prose")
