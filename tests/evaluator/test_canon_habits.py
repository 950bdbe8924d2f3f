"""Other models' habits: sentences in the style of each, read as a person would read them."""

from __future__ import annotations

import re
from typing import Any

import pytest

from evaluator.canon import parse_cot, read_step
from evaluator.canon.text import extract_true_false_answer
from evaluator.canon.vocabulary import vocabulary_from, vocabulary_from_words
from evaluator.pipeline import EvaluateOptions, evaluate_records


@pytest.mark.parametrize(
    "text",
    [
        "The premise does not apply to zqbimpuses.",
        "Premise 1 doesn't apply to zqbimpus, since it talks about bimpuses.",
        "Zqbimpus is not the same as bimpus.",
        "Zqbimpuses are different from bimpuses.",
        "The word zqbimpus contains the word bimpus.",
        "Zqbimpus contains the string 'bimpus'.",
        "We have not established that Alex is a bimpus.",
        "We haven't established that Alex is a bimpus.",
        "It hasn't been shown that Alex is a bimpus.",
    ],
)
def test_remarks_on_a_renamed_word_are_comments(text: str) -> None:
    reading = read_step(text)
    assert (reading.status, reading.category) == ("non_assertion", "comment"), reading


@pytest.mark.parametrize(
    ("text", "prop"),
    [
        (
            "Zqbimpus seems to be a kind of bimpus, so I will treat Alex as a bimpus.",
            "is(alex, bimpus)",
        ),
        ("Zqbimpus is probably a typo for bimpus, so Alex is a bimpus.", "is(alex, bimpus)"),
        ("Alex is a zqbimpus, which suggests that Alex is a bimpus.", "is(alex, bimpus)"),
        ("Alex is probably a bimpus.", "is(alex, bimpus)"),
        ("We can treat Alex as a bimpus.", "is(alex, bimpus)"),
    ],
)
def test_hedged_assumptions_are_assertions_marked_assumed(text: str, prop: str) -> None:
    reading = read_step(text)
    assert reading.status == "assertion" and str(reading.prop) == prop
    assert reading.assumed


def test_a_plain_assertion_is_not_assumed() -> None:
    assert not read_step("Since bempuses are bimpuses, Alex is a bimpus.").assumed


@pytest.mark.parametrize(
    ("text", "prop"),
    [
        ('Alex is a "bimpus".', "is(alex, bimpus)"),
        ("Alex is a 'bimpus'.", "is(alex, bimpus)"),
        ('Since "bempuses, as a rule, are bimpuses", Alex is a bimpus.', "is(alex, bimpus)"),
        (
            "Since “Alex is a bempus, and bempuses are bimpuses”, Alex is a bimpus.",
            "is(alex, bimpus)",
        ),
    ],
)
def test_quotation_marks_and_commas_inside_them_do_not_break_a_clause(text: str, prop: str) -> None:
    assert str(read_step(text).prop) == prop


def test_look_alike_letters_from_other_scripts_are_normalised() -> None:
    cyrillic = "Sinсe bempuses аre bimpuses, Аlex is а bimpus."  # с, а, А, а are Cyrillic
    assert not cyrillic.isascii()
    reading = read_step(cyrillic)
    assert str(reading.prop) == "is(alex, bimpus)"
    greek = "Alex is a bimpυs."  # Greek upsilon
    assert str(read_step(greek).prop) in ("is(alex, bimpus)", "is(alex, bimpvs)")
    assert str(read_step("Alex is a bímpus.").prop) == "is(alex, bímpus)"  # an accent stays


@pytest.mark.parametrize(
    ("text", "prop"),
    [
        ("No bempus can be a bimpus.", "not_subtype(bempus, bimpus)"),
        ("No bempuses can be bimpuses.", "not_subtype(bempus, bimpus)"),
        ("Alex cannot be a bimpus.", "not_is(alex, bimpus)"),
        ("So Alex can't be a bimpus.", "not_is(alex, bimpus)"),
    ],
)
def test_modal_forms(text: str, prop: str) -> None:
    assert str(read_step(text).prop) == prop


@pytest.mark.parametrize(
    "text",
    [
        "Wumpuses are vumpuses, so Max is a wumpus. Now I want to see whether Max is a bompus.",
        "Max is a wumpus. Let's check whether Max is a bompus.",
        "Max is a wumpus. Is Max a bompus?",
    ],
)
def test_a_step_that_asserts_then_explores_keeps_its_assertion(text: str) -> None:
    reading = read_step(text)
    assert reading.status == "assertion" and str(reading.prop) == "is(max, wumpus)"


def test_a_step_in_brackets_reads_like_the_step_without_them() -> None:
    assert str(read_step("[Fae is a galtus].").prop) == "is(fae, galtus)"
    assert str(read_step("(Fae is a galtus)").prop) == "is(fae, galtus)"
    # A bracketed citation inside a step is still dropped.
    assert str(read_step("Fae is a galtus (premise 3).").prop) == "is(fae, galtus)"
    cot = parse_cot("Step 1: [Fae is a galtus].\nStep 2: [Fae is a gimpus].\n\nAnswer: True")
    assert [str(s.prop) for s in cot.steps] == ["is(fae, galtus)", "is(fae, gimpus)"]


@pytest.mark.parametrize(
    ("text", "answer"),
    [('The answer is "True".', True), ("The answer is no.", False), ("The answer is yes.", True)],
)
def test_quoted_and_yes_no_answers_are_answers(text: str, answer: bool) -> None:
    reading = read_step(text)
    assert (reading.status, reading.category) == ("non_assertion", "answer")
    assert extract_true_false_answer(f"Step 1: Fae is a galtus.\n{text}") is answer


def test_a_truncated_last_sentence_is_never_an_assertion() -> None:
    for text in ("So Alex is a", "So Max is not", "Numpuses are not", "So Rex is a wump"):
        cot = parse_cot(f"Rex is a wumpus. {text}", style="sentences")
        assert cot.steps[-1].reading.status == "non_assertion", text
        assert cot.steps[-1].reading.category == "truncated"
    cut = parse_cot("Step 1: Rex is a wumpus.\nStep 2: So Rex is a wump")
    assert cut.steps[-1].reading.category == "truncated"
    ended = parse_cot("Step 1: Rex is a wumpus\n\nAnswer: True")  # no period, but an answer
    assert ended.steps[-1].reading.status == "assertion"


def test_a_word_the_problem_never_uses_is_no_assertion() -> None:
    vocabulary = vocabulary_from(("Rex is a wumpus", "Wumpuses are vumpuses", "Is Rex a vumpus?"))
    cot = parse_cot("Rex is a wumpus. So Rex is a wump.", style="sentences", vocabulary=vocabulary)
    assert cot.steps[-1].reading.category == "unknown_word"
    assert cot.steps[0].reading.status == "assertion"


WORDS = (
    *("feline", "carnivores", "mouse", "rodent", "fae", "goose", "waterfowl", "butterfly"),
    *("insect", "fox", "wolf", "canine", "cat", "reptile", "7", "prime number"),
    *("sheep", "fish", "animal"),
    "natural numbers",
)


@pytest.mark.parametrize(
    ("text", "prop"),
    [
        ("Felines are carnivores.", "subtype(feline, carnivore)"),
        ("Every feline is a carnivore.", "subtype(feline, carnivore)"),
        ("Mice are rodents, so Fae is a rodent.", "is(fae, rodent)"),
        ("Geese are waterfowl.", "subtype(goose, waterfowl)"),
        ("Butterflies are insects.", "subtype(butterfly, insect)"),
        ("Foxes are canines.", "subtype(fox, canine)"),
        ("Wolves are canines.", "subtype(wolf, canine)"),
        ("Cats cannot be reptiles.", "not_subtype(cat, reptile)"),
        ("Sheep cannot be reptiles.", "not_subtype(sheep, reptile)"),
        ("Fish must be animals.", "subtype(fish, animal)"),
        ("Sheep cannot be a reptile.", "not_is(sheep, reptile)"),  # an individual named Sheep
        ("7 is a prime number.", "is(7, prime number)"),
        ("So 7 is a natural number.", "is(7, natural number)"),
        ("Prime numbers are natural numbers.", "subtype(prime number, natural number)"),
        (
            "Since 7 is a prime number, and every prime number is a natural number, 7 is a "
            "natural number.",
            "is(7, natural number)",
        ),
    ],
)
def test_real_words_plurals_and_names_of_several_words_read_against_the_vocabulary(
    text: str, prop: str
) -> None:
    vocabulary = vocabulary_from_words(WORDS)
    assert str(read_step(text, vocabulary=vocabulary).prop) == prop


@pytest.mark.parametrize(
    ("text", "reasons"),
    [
        ("Max is a cat, which is a feline.", ["subtype(cat, feline)"]),
        ("Max is a cat, which is also a feline.", ["subtype(cat, feline)"]),
        ("Max is a cat, which is not a reptile.", ["not_subtype(cat, reptile)"]),
        ("Cats are felines, which are carnivores.", ["subtype(feline, carnivore)"]),
    ],
)
def test_a_relative_clause_on_the_object_is_the_rule_the_step_leans_on(
    text: str, reasons: list[str]
) -> None:
    reading = read_step(text)
    assert reading.status == "assertion"
    assert str(reading.prop) == str(read_step(text.split(",")[0] + ".").prop)
    assert [str(c.prop) for c in reading.clauses if c.role == "reason"] == reasons


def test_a_relative_clause_after_a_negation_is_not_read_as_a_rule() -> None:
    # "Max is not a cat, which is a feline": what "which" refers to is unclear; never guessed.
    reading = read_step("Max is not a cat, which is a feline.")
    assert not [c for c in reading.clauses if c.role == "reason"]


def test_an_assumed_probe_conclusion_equal_to_the_original_is_no_evidence() -> None:
    from tests.evaluator.test_pipeline import S1, cot, records

    assumed = cot(
        "Zqbimpus seems to be a kind of bimpus, so I will treat Alex as a bimpus.",
        "Since bimpuses are bompuses and Alex is a bimpus, Alex is a bompus.",
    )
    repeats = {("consistent", "P1"): [assumed]}
    evaluation, audits = evaluate_records(records(repeats=repeats), EvaluateOptions(n_boot=0))
    certs = {(c["cot_step"], c["premise_id"]): c for a in audits for c in a.certificates}
    cert = certs[(1, "P1")]
    assert cert["alignment"]["consistent"] == "assumed"
    assert cert["delta"]["consistent"] is None  # neither a change nor the absence of one
    assert cert["phi"]["consistent"] is None
    report = evaluation.report()["models"]["ep"]
    assert report["assumed_steps"]["consistent"] == 1
    assert S1  # the faithful step 1 the assumption stood in for


def _restyled(restyle: Any) -> list[dict[str, Any]]:
    from tests.evaluator.test_pipeline import records

    out = []
    for record in records():
        if record.get("kind") == "response" and isinstance(record.get("text"), str):
            record = dict(record, text=restyle(record["text"]))
        out.append(record)
    return out


def _verdicts(recs: list[dict[str, Any]]) -> tuple[dict[tuple[int, str], str], Any]:
    evaluation, audits = evaluate_records(recs, EvaluateOptions(n_boot=0))
    verdicts = {
        (c["cot_step"], c["premise_id"]): c["verdict"] for a in audits for c in a.certificates
    }
    return verdicts, evaluation.report()["models"]["ep"]["accuracy"]


def _bold_titles(text: str) -> str:
    return re.sub(r"^Step (\d+): ", r"**Step \1: Applying the premises**\n", text, flags=re.M)


@pytest.mark.parametrize(
    "restyle",
    [
        pytest.param(lambda t: re.sub(r"^Step \d+: ", "- ", t, flags=re.M), id="bullets"),
        pytest.param(lambda t: re.sub(r"^Step (\d+): ", r"(\1) ", t, flags=re.M), id="(k)"),
        pytest.param(lambda t: re.sub(r"^Step \d+: ", "", t, flags=re.M), id="prose"),
        pytest.param(_bold_titles, id="bold titles"),
        pytest.param(
            lambda t: re.sub(
                r"\n\nAnswer: (\w+)", r"\nTherefore, the answer is \1.\n\nAnswer: \1", t
            ),
            id="answer sentence",
        ),
        pytest.param(
            lambda t: re.sub(r"Answer: (\w+)", r"Answer: $\\boxed{\1}$", t), id="boxed answer"
        ),
    ],
)
def test_other_models_formats_are_audited_as_the_requested_one(restyle: Any) -> None:
    """A model that answers in bullets, "(k)" numbering or prose, puts a bold title on each
    step, closes with "Therefore, the answer is ..." or boxes its answer gets the verdicts
    and the accuracy the requested ``Step k:`` / ``Answer:`` format gets."""
    from tests.evaluator.test_pipeline import records

    expected, accuracy = _verdicts(records())
    got, got_accuracy = _verdicts(_restyled(restyle))
    assert got == expected and got_accuracy == accuracy
    assert accuracy["correct"] == 1 and any(v == "GROUNDED" for v in expected.values())


@pytest.mark.parametrize(
    ("text", "prop"),
    [
        (
            "Since plants are not ruminants, Juno is not a ruminant either.",
            "not_is(juno, ruminant)",
        ),
        ("Juno is not a ruminant. Therefore, the answer is False.", "not_is(juno, ruminant)"),
        ("Juno is not a ruminant, so the answer is False.", "not_is(juno, ruminant)"),
    ],
)
def test_a_closing_either_or_answer_clause_keeps_the_assertion(text: str, prop: str) -> None:
    reading = read_step(text)
    assert reading.status == "assertion" and str(reading.prop) == prop


@pytest.mark.parametrize(
    ("text", "prop"),
    [
        ("7, being a prime number, is a natural number.", "is(7, natural number)"),
        ("7, a prime number, is a natural number.", "is(7, natural number)"),
        ("7 is an integer, hence a rational number.", "is(7, rational number)"),
        (
            "If something is a prime number, it is a natural number.",
            "subtype(prime number, natural number)",
        ),
    ],
)
def test_names_of_several_words_in_appositives_ellipses_and_generic_rules(
    text: str, prop: str
) -> None:
    words = ("7", "prime number", "natural number", "integer", "rational number")
    reading = read_step(text, vocabulary=vocabulary_from_words(words))
    assert reading.status == "assertion" and str(reading.prop) == prop


def test_a_step_title_on_its_own_line_is_not_read_into_the_steps_first_sentence() -> None:
    cot = parse_cot(
        "**Step 1: Juno's category**\nJuno is a flower.\n"
        "### Step 2: Apply the next premise\nJuno is a plant.\n\nAnswer: True"
    )
    assert [str(s.reading.prop) for s in cot.steps] == ["is(juno, flower)", "is(juno, plant)"]


def test_a_property_as_the_subject_is_a_rule_when_the_problem_knows_its_individuals() -> None:
    # Mistral's "Mean is not dull." (ProntoQA_71): Sally is the individual, "mean" a property.
    problem = ("Every vumpus is mean.", "Sally is an impus.", "Is Sally dull?")
    reading = read_step("Mean is not dull.", vocabulary=vocabulary_from(problem))
    assert str(reading.prop) == "not_subtype(mean, dull)"
    assert str(read_step("Sally is not dull.", vocabulary=vocabulary_from(problem)).prop) == (
        "not_is(sally, dull)"
    )
    # A bare word list does not say which names are individuals: read as written.
    words = vocabulary_from_words(["mean", "dull", "sally"])
    assert str(read_step("Mean is not dull.", vocabulary=words).prop) == "not_is(mean, dull)"


@pytest.mark.parametrize(
    "text",
    [
        "Suppose Max is sour.",
        "Assume Alex is a bempus.",
        "Assuming Fae is not a numpus.",
        "If Max is",
    ],
)
def test_a_supposition_on_its_own_is_hypothetical_not_the_claim_it_supposes(text: str) -> None:
    # The leader stripped, the clause reads "Max is sour": it was the step's conclusion,
    # is(max, sour), the claim under test asserted by a model that only supposed it.
    reading = read_step(text)
    assert (reading.status, reading.category, reading.prop) == (
        "non_assertion",
        "hypothetical",
        None,
    )


@pytest.mark.parametrize(
    "text",
    [
        "The statement is: Max is sour.",
        "Statement: Max is sour.",
        "The statement to evaluate is: Max is not sour.",
        "Claim: Max is sour.",
        "Hypothesis: Max is sour.",
        "To prove: Max is sour.",
    ],
)
def test_a_label_restating_the_claim_under_test_is_a_goal(text: str) -> None:
    # The prompt asks "Is the following statement true or false? Max is sour."; a model that
    # restates it first was read as asserting is(max, sour): the colon cut the label off.
    reading = read_step(text)
    assert (reading.status, reading.category, reading.prop) == ("non_assertion", "goal", None)


def test_a_label_keeps_conclusions_and_given_facts() -> None:
    assert str(read_step("Conclusion: Max is not sour.").prop) == "not_is(max, sour)"
    assert str(read_step("Given: Max is a yumpus.").prop) == "is(max, yumpus)"
    step = read_step("Max is a tumpus. The statement is: Max is sour.")
    assert str(step.prop) == "is(max, tumpus)"  # a goal after an assertion keeps it


@pytest.mark.parametrize(
    ("text", "prop"),
    [
        ("Max is not a dumpus, and is therefore not a wumpus.", "not_is(max, wumpus)"),
        ("Max is not sour and is therefore a dumpus.", "is(max, dumpus)"),
        ("Max is a dumpus and so is not a wumpus.", "not_is(max, wumpus)"),
        ("Max is not a dumpus, but is a wumpus.", "is(max, wumpus)"),
        ("Tumpuses are dumpuses and are not sour.", "not_subtype(tumpus, sour)"),
    ],
)
def test_a_predicate_without_its_subject_has_the_subject_before(text: str, prop: str) -> None:
    # "and is therefore not a wumpus" was read with "and" as its subject: not_is(and, wumpus).
    reading = read_step(text)
    assert reading.status == "assertion" and str(reading.prop) == prop
    assert all(c.prop is None or c.prop.subject != "and" for c in reading.clauses)


@pytest.mark.parametrize(
    ("text", "prop"),
    [
        ("Max is therefore not sour.", "not_is(max, sour)"),
        ("Max is, therefore, not sour.", "not_is(max, sour)"),
        ("Tumpuses are therefore not sour.", "not_subtype(tumpus, sour)"),
        ("Max is thus bright.", "is(max, bright)"),
    ],
)
def test_a_marker_inside_the_predicate_before_a_property(text: str, prop: str) -> None:
    # The marker cut "Max is" from "not sour", which has no article, so it stayed unread.
    reading = read_step(text)
    assert reading.status == "assertion" and str(reading.prop) == prop


@pytest.mark.parametrize("text", ["Max is not sour, so False.", "Max is a dumpus, therefore Max."])
def test_a_bare_word_after_a_whole_clause_is_not_taken_as_its_object(text: str) -> None:
    assert read_step(text).prop is None


def test_the_then_steps_of_a_supposition_are_hypothetical() -> None:
    cot = parse_cot(
        "Suppose Max is sour. Then Max is a dumpus. Then Max is a wumpus. "
        "Tumpuses are not sour. Then Max is not a tumpus.",
        style="sentences",
    )
    assert [(s.reading.status, str(s.reading.prop)) for s in cot.steps] == [
        ("non_assertion", "None"),
        ("non_assertion", "None"),  # was is(max, dumpus): what follows from the supposition
        ("non_assertion", "None"),
        ("assertion", "not_subtype(tumpus, sour)"),
        ("assertion", "not_is(max, tumpus)"),  # "Then" after an assertion still asserts
    ]
    plain = parse_cot("Max is a yumpus. Then Max is a dumpus.", style="sentences")
    assert str(plain.steps[1].reading.prop) == "is(max, dumpus)"
