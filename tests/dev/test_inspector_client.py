"""The inspector page as a whole MCP client, in headless Chromium, against examples/dev_tour.py
served under the policy: it answers elicitation and sampling from forms, roots from the list the
user edits, subscribes to a resource and shows its updates, completes arguments, cancels a running
call, builds nested forms from a pydantic model's $defs, shows a gated tool greyed with its reason,
and shows the server's skills; on every revision its switcher offers.

Each new view is photographed; MCPKIT_UPDATE_SCREENSHOTS=1 refreshes docs/img/dev-*.png."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from tests.dev.browser import ROOT, browser, dev_inspector, ready, shoot, text, view, wait

TOUR = ROOT / "examples" / "dev_tour.py"
HANDSHAKE = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"]
#: elicitation exists from 2025-06-18 on (EL-01)
ELICITING = ["2025-06-18", "2025-11-25", "2026-07-28"]
__all__ = ["browser"]  # the fixture, imported to be used here


@pytest.fixture(scope="module")
def tour() -> Iterator[str]:
    """The tour under the policy: fetch_page (open-world) is gated, the rest declared safe."""
    with dev_inspector(str(TOUR), "--policy") as url:
        yield url


def _revision(browser, revision: str) -> None:
    if browser.find_element(By.ID, "revision").get_attribute("value") != revision:
        Select(browser.find_element(By.ID, "revision")).select_by_value(revision)
    wait(browser, lambda b: b.execute_script("return document.body.dataset.connected") == revision)


def _tool(browser, tool: str, **fields: str) -> None:
    view(browser, "tools")
    browser.find_element(By.CSS_SELECTOR, f'#tool-list li[data-name="{tool}"]').click()
    for key, value in fields.items():
        browser.find_element(By.ID, f"arg-{key}").send_keys(value)
    browser.find_element(By.ID, "call-tool").click()


def _verdict(browser) -> str:
    wait(browser, lambda b: b.find_elements(By.ID, "call-verdict"))
    return text(browser, "#tool-outcome")


@pytest.mark.parametrize("revision", ELICITING)
def test_elicitation_is_answered_with_a_form_built_from_the_requested_schema(tour, browser, revision, tmp_path):
    ready(browser, tour)
    _revision(browser, revision)
    _tool(browser, "rsvp", event="the launch")
    card = wait(browser, lambda b: b.find_elements(By.ID, "elicitation"))[0]
    assert "Are you coming to the launch?" in card.text
    assert browser.find_element(By.ID, "elicit-coming").is_selected()  # the schema's default
    browser.find_element(By.ID, "elicit-guests").send_keys("3")
    Select(browser.find_element(By.ID, "elicit-meal")).select_by_visible_text("fish")
    if revision == "2025-11-25":
        shoot(browser, "elicitation", tmp_path)
    browser.find_element(By.ID, "elicit-accept").click()
    assert "the launch: coming=True, guests=3, meal=fish" in _verdict(browser)
    assert not browser.find_elements(By.ID, "elicitation")  # answered, gone

    _tool(browser, "rsvp", event="the party")
    wait(browser, lambda b: b.find_elements(By.ID, "elicit-decline"))[0].click()
    assert "no answer (decline)" in _verdict(browser)
    view(browser, "raw")
    raw = text(browser, "#raw")
    if revision == "2026-07-28":  # no request from the server: an input_required result, then a retry
        assert '"resultType":"input_required"' in raw and '"inputResponses":{"elicit_1":{"action":"decline"}}' in raw
    else:
        assert '← {"jsonrpc":"2.0","id":' in raw and '"method":"elicitation/create"' in raw
        assert '"result":{"action":"decline"}}' in raw


@pytest.mark.parametrize("revision", ["2025-11-25", "2026-07-28"])
def test_a_titled_choice_and_a_multi_select_in_an_elicitation_form(tour, browser, revision):
    # EL-02: the rich enums of 2025-11-25 (a oneOf of titled consts, an array of an enum)
    ready(browser, tour)
    _revision(browser, revision)
    _tool(browser, "survey")
    wait(browser, lambda b: b.find_elements(By.ID, "elicitation"))
    rating = Select(browser.find_element(By.ID, "elicit-rating"))
    assert [o.text for o in rating.options] == ["Good, thanks", "Could be better"]
    rating.select_by_visible_text("Could be better")
    liked = Select(browser.find_element(By.ID, "elicit-liked"))
    assert liked.is_multiple and [o.text for o in liked.options] == ["talks", "food", "music"]
    liked.select_by_visible_text("talks")
    liked.select_by_visible_text("music")
    browser.find_element(By.ID, "elicit-accept").click()
    assert "accept: rating=bad, liked=talks, music" in _verdict(browser)


def test_a_url_elicitation_shows_the_url_as_a_link_apart_from_the_page(tour, browser):
    ready(browser, tour)  # 2025-11-25, the revision of URL mode (EL-04)
    _tool(browser, "connect_account")
    wait(browser, lambda b: b.find_elements(By.ID, "elicitation"))
    link = browser.find_element(By.ID, "elicit-url")
    assert link.tag_name == "a" and link.get_attribute("href") == "https://calendar.example.com/connect?id=42"
    assert link.get_attribute("rel") == "noopener noreferrer"
    assert "Sign in to the calendar service." in text(browser, "#elicitation")
    browser.find_element(By.ID, "elicit-accept").click()
    assert "sign-in accept" in _verdict(browser)


@pytest.mark.parametrize("revision", [*HANDSHAKE, "2026-07-28"])
def test_sampling_is_answered_by_the_user_or_with_the_canned_answer(tour, browser, revision, tmp_path):
    ready(browser, tour)
    _revision(browser, revision)
    _tool(browser, "haiku", topic="autumn")
    card = wait(browser, lambda b: b.find_elements(By.ID, "sampling"))[0]
    assert "Write a haiku about autumn." in card.text and "system: You are a poet." in card.text
    reply = browser.find_element(By.ID, "sample-text")
    reply.clear()
    reply.send_keys("leaves drift on still water")
    if revision == "2025-11-25":
        shoot(browser, "sampling", tmp_path)
    browser.find_element(By.ID, "sample-send").click()
    assert "leaves drift on still water" in _verdict(browser)
    if revision != "2026-07-28":  # declined: the server's request gets an error (an input response cannot be one)
        _tool(browser, "haiku", topic="winter")
        wait(browser, lambda b: b.find_elements(By.ID, "sample-decline"))[0].click()
        assert _verdict(browser).startswith("isError")
        view(browser, "raw")
        assert '"error":{"code":-1,"message":"User rejected sampling request"}}' in text(browser, "#raw")

    # the Client tab's canned answer, taken at once
    view(browser, "client")
    browser.find_element(By.ID, "sampling-auto").click()
    canned = browser.find_element(By.ID, "sampling-text")
    canned.clear()
    canned.send_keys("a canned haiku")
    _tool(browser, "haiku", topic="spring")
    assert "a canned haiku" in _verdict(browser)
    assert not browser.find_elements(By.ID, "sampling")


@pytest.mark.parametrize("revision", [*HANDSHAKE, "2026-07-28"])
def test_roots_come_from_the_list_the_user_edits(tour, browser, revision, tmp_path):
    ready(browser, tour)
    _revision(browser, revision)
    _tool(browser, "roots")
    assert "file:///home/user/project" in _verdict(browser)
    view(browser, "client")
    browser.find_element(By.ID, "add-root").click()
    uri = browser.find_elements(By.CSS_SELECTOR, "#roots .root-uri")[-1]
    uri.clear()
    uri.send_keys("file:///srv/data")
    browser.find_element(By.CSS_SELECTOR, "#roots li:last-child .root-name").click()  # the edit is made (change)
    if revision == "2025-11-25":
        shoot(browser, "client", tmp_path)
    if revision != "2026-07-28":  # RT-03; a sessionless revision reads the roots with each call instead
        view(browser, "raw")
        wait(browser, lambda b: '"method":"notifications/roots/list_changed"' in text(b, "#raw"))
    _tool(browser, "roots")
    outcome = _verdict(browser)
    assert "file:///home/user/project" in outcome and "file:///srv/data" in outcome


@pytest.mark.parametrize("revision", ["2025-11-25", "2026-07-28"])
def test_a_subscribed_resource_shows_its_updates(tour, browser, revision, tmp_path):
    ready(browser, tour)
    _revision(browser, revision)
    view(browser, "resources")
    browser.find_element(By.CSS_SELECTOR, '#resource-list li[data-name="tour://counter"]').click()
    wait(browser, lambda b: "counter = " in text(b, "#resource-detail"))
    browser.find_element(By.ID, "subscribe").click()
    wait(browser, lambda b: text(b, "#subscribe") == "Unsubscribe")
    if revision == "2026-07-28":  # the listen stream says what it will send before any change
        view(browser, "feed")
        wait(browser, lambda b: "tour://counter" in text(b, "#feed") and "listening" in text(b, "#feed"))
    _tool(browser, "bump")
    _verdict(browser)
    bumped = json.loads(browser.find_element(By.ID, "structured").get_attribute("textContent"))["result"]
    view(browser, "resources")
    wait(browser, lambda b: text(b, "#res-updates").startswith("updated 1×"))
    wait(browser, lambda b: f"counter = {bumped}" in text(b, "#resource-detail"))
    if revision == "2025-11-25":
        shoot(browser, "subscription", tmp_path)
    browser.find_element(By.ID, "subscribe").click()  # unsubscribe: the next bump is not shown
    wait(browser, lambda b: text(b, "#subscribe") == "Subscribe")
    view(browser, "raw")
    method = "subscriptions/listen" if revision == "2026-07-28" else "resources/unsubscribe"
    assert f'"method":"{method}"' in text(browser, "#raw")


def test_ping_is_answered_and_offered_only_where_it_exists(tour, browser):
    ready(browser, tour)
    browser.find_element(By.ID, "ping").click()
    view(browser, "feed")
    wait(browser, lambda b: "ping answered in" in text(b, "#feed"))
    view(browser, "raw")
    assert '"method":"ping"}' in text(browser, "#raw")
    _revision(browser, "2026-07-28")  # the sessionless revision has no ping (its §14)
    assert not browser.find_element(By.ID, "ping").is_enabled()


def test_completion_is_offered_for_template_variables_and_prompt_arguments(tour, browser, tmp_path):
    ready(browser, tour)
    view(browser, "resources")
    browser.find_element(By.CSS_SELECTOR, '#resource-list li[data-name="tour://menus/{menu}"]').click()
    field = browser.find_element(By.ID, "res-menu")
    field.send_keys("br")
    wait(browser, lambda b: field.get_attribute("data-offered") == "breakfast\nbrunch")
    options = browser.find_elements(By.CSS_SELECTOR, "#res-menu-options option")
    assert [o.get_attribute("value") for o in options] == ["breakfast", "brunch"]
    view(browser, "raw")
    assert '"method":"completion/complete","params":{"ref":{"type":"ref/resource","uri":"tour://menus/{menu}"}' in text(browser, "#raw")

    # a prompt argument whose completion offers its values up front (a Literal) is a choice
    view(browser, "prompts")
    browser.find_element(By.CSS_SELECTOR, '#prompt-list li[data-name="dinner_plan"]').click()
    choice = Select(wait(browser, lambda b: b.find_elements(By.CSS_SELECTOR, "select#prompt-cuisine"))[0])
    assert [o.text for o in choice.options] == ["french", "italian", "japanese"]
    choice.select_by_visible_text("italian")
    shoot(browser, "completion", tmp_path)
    browser.find_element(By.ID, "get-prompt").click()
    wait(browser, lambda b: "Plan a italian dinner for 2 guests." in text(b, "#prompt-detail"))


@pytest.mark.parametrize("revision", ["2025-11-25", "2026-07-28"])
def test_a_running_call_is_cancelled(tour, browser, revision):
    ready(browser, tour)
    _revision(browser, revision)
    _tool(browser, "count_slowly", steps="40")
    # cancelled once it is surely running: its first progress reached the page
    view(browser, "feed")
    wait(browser, lambda b: "1/40 step 1" in text(b, "#feed"))
    view(browser, "tools")
    browser.find_element(By.ID, "cancel-call").click()
    verdict = _verdict(browser)
    assert verdict.startswith("cancelled · request ")
    assert not browser.find_element(By.ID, "cancel-call").is_displayed()
    view(browser, "raw")
    raw = text(browser, "#raw")
    assert "counted to 40" not in raw
    if revision != "2026-07-28":  # 2026-07-28 cancels by closing the stream (HM-10)
        request_id = verdict.split("request ", 1)[1].split()[0]
        assert f'"method":"notifications/cancelled","params":{{"requestId":{request_id},' in raw


def test_a_pydantic_model_parameter_is_a_nested_form(tour, browser, tmp_path):
    ready(browser, tour)
    view(browser, "tools")
    browser.find_element(By.CSS_SELECTOR, '#tool-list li[data-name="book"]').click()
    for key, value in {"guest": "Ada", "size": "4", "address-street": "1 Main St", "address-city": "Oslo"}.items():
        browser.find_element(By.ID, f"arg-booking-{key}").send_keys(value)
    seating = Select(browser.find_element(By.ID, "arg-booking-seating"))
    assert [o.text for o in seating.options] == ["", "inside", "terrace"]  # the values, no JSON quotes
    assert seating.first_selected_option.text == "inside"  # the default
    seating.select_by_visible_text("terrace")
    browser.find_element(By.ID, "arg-booking-vegetarian").click()
    # the checkbox starts its cell, as the inputs above it do
    guest_x = browser.find_element(By.ID, "arg-booking-guest").rect["x"]
    assert browser.find_element(By.ID, "arg-booking-vegetarian").rect["x"] - guest_x < 8
    postcode = browser.find_element(By.ID, "arg-booking-address-postcode")  # str | None: optional, plain text
    assert postcode.get_attribute("type") == "text"
    shoot(browser, "form", tmp_path)
    browser.find_element(By.ID, "call-tool").click()
    assert "table for 4 (Ada, terrace) delivered to 1 Main St, Oslo" in _verdict(browser)

    # str | None: a bare string is the value, an empty field leaves it out
    _tool(browser, "greet", name="demo")
    assert "Hello, demo!" in _verdict(browser)
    _tool(browser, "greet")
    assert "Hello, everyone!" in _verdict(browser)


def test_a_gated_tool_is_shown_greyed_with_its_reason(tour, browser, tmp_path):
    ready(browser, tour)
    item = browser.find_element(By.CSS_SELECTOR, '#tool-list li[data-name="fetch_page"]')
    assert "gated" in item.get_attribute("class").split()
    assert "open_world" in item.text and "MCPKIT_ALLOW_OPEN_WORLD" in item.text
    item.click()
    assert text(browser, "#gated-reason").startswith("Gated: not listed or callable in the current configuration:")
    assert not browser.find_element(By.ID, "call-tool").is_enabled()
    assert not browser.find_element(By.ID, "arg-url").is_enabled()
    shoot(browser, "gated", tmp_path)

    # a manager's gated action is offered disabled, with its reason; the others work
    browser.find_element(By.CSS_SELECTOR, '#tool-list li[data-name="notes"]').click()
    actions = Select(browser.find_element(By.ID, "arg-action")).options
    assert [(o.text.split()[0], o.is_enabled()) for o in actions] == [("list", True), ("wipe", False)]
    assert "gated: destructive tools are disabled" in actions[1].text
    browser.find_element(By.ID, "call-tool").click()
    assert "buy bread" in _verdict(browser)


def test_the_skills_are_shown_with_their_files(tour, browser, tmp_path):
    ready(browser, tour)
    view(browser, "skills")
    browser.find_element(By.CSS_SELECTOR, '#skill-list li[data-name="skill://release-notes/SKILL.md"]').click()
    wait(browser, lambda b: "name: release-notes" in text(b, "#skill-file"))
    browser.find_element(By.CSS_SELECTOR, '#skill-detail button[data-uri="skill://release-notes/references/STYLE.md"]').click()
    wait(browser, lambda b: "skill://release-notes/references/STYLE.md" in text(b, "#skill-file"))
    shoot(browser, "skills", tmp_path)


HOSTILE = '''
from mcpkit import Context, Server
server = Server("hostile", "1.0")
EVIL = '<img src=x onerror="document.body.dataset.pwned=1">'

@server.tool(destructive=False, open_world=False, description=EVIL)
async def ask(ctx: Context) -> str:
    await ctx.elicit(EVIL, {"type": "object", "properties": {
        "pick": {"type": "string", "enum": [EVIL], "description": EVIL}}})
    await ctx.sample(EVIL, system_prompt=EVIL)
    return EVIL
'''


def test_what_the_server_sends_is_shown_as_text_never_run(browser, tmp_path):
    # the new sinks (elicitation message, form descriptions and choices, sampling messages) keep
    # the page's rule: server data reaches the DOM as textContent only
    path = tmp_path / "hostile.py"
    path.write_text(HOSTILE)
    with dev_inspector(str(path)) as url:
        ready(browser, url)
        _tool(browser, "ask")
        card = wait(browser, lambda b: b.find_elements(By.ID, "elicitation"))[0]
        assert card.text.count('<img src=x onerror="document.body.dataset.pwned=1">') == 3  # message, choice, help
        browser.find_element(By.ID, "elicit-accept").click()
        card = wait(browser, lambda b: b.find_elements(By.ID, "sampling"))[0]
        assert 'user: <img src=x onerror=' in card.text and 'system: <img src=x' in card.text
        browser.find_element(By.ID, "sample-send").click()
        assert '<img src=x onerror=' in _verdict(browser)
        assert not browser.find_elements(By.CSS_SELECTOR, "main img, header img")
        assert browser.execute_script("return document.body.dataset.pwned") is None
