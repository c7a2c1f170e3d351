"""Every notebook as a student meets it: JupyterLab in headless Chromium, run all cells, move every
control.

For each ``notebooks/NN_*.ipynb`` (found by glob, so new notebooks are covered when they land) the
test opens the notebook in JupyterLab (served from a copy of the repository root, as ``make lab``
does), runs every cell and asserts that

- no cell failed except those tagged ``raises-exception`` (the cells that fail on purpose);
- every ``<img>`` of the markdown loaded (``naturalWidth > 0``) and the server answered no request
  with 404;
- every visible widget control (slider, dropdown, checkbox, text box) redraws: after moving it with
  the keyboard or the mouse, the picture or the message of its widget changed;
- no traceback appeared in an output area, on the kernel's output channel (where JupyterLab's log
  console shows errors of widget callbacks) or in the server's log;
- a bad source typed into a text box (empty, longer than the model reads, or, for a character
  vocabulary, characters the model does not know) gets a readable message in the cell, and the
  widget still redraws afterwards.

It saves one screenshot per notebook in ``build/browser/NN_name.png`` and the controls it moved in
``build/browser/NN_name.json``; the summary at the end of ``make test-browser`` adds them up.
"""

import json
import re
from pathlib import Path

import pytest

from .conftest import OUT, ROOT

pytestmark = pytest.mark.browser

NOTEBOOKS = sorted(p.name for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
# 07 loads the model that 06 trains and saves (or trains it again, which costs minutes): one test
# runs them one after the other on the same server. Every other notebook is a test of its own,
# spread over the workers.
TRAINED_MODEL = ("06_", "07_")
RUN_ALL_TIMEOUT_MS = 900_000
REDRAW_TIMEOUT_MS = 30_000
CONTROLS = ".widget-slider, .widget-dropdown, .widget-checkbox, .widget-text"
# Chromium's words; a kernel id may contain "404"
NOT_FOUND = re.compile(r"status of 404|404 \(Not Found\)")
# What a student types into an explorer's source box -> words the message must contain. Every model
# refuses an empty source and one longer than its max_len (256 positions: characters for 06's, BPE
# tokens for 12's); only a character vocabulary (06's) lacks characters: byte-level BPE (12's)
# spells "@@@" and draws it.
BAD_SOURCES = {"": "empty", "1 " * 300: "reads at most"}
CHARACTER_VOCAB_SOURCES = {"@@@": "knows no"}
CHARACTER_VOCAB_NOTEBOOKS = ("06_",)

# Errors from what the widgets make the kernel do: their callbacks answer comm messages. A cell's
# own output (an execute_request's, such as a cell tagged raises-exception whose error arrives late)
# is FAILED_CELLS' job.
HOOK_KERNEL = """() => {
  const panel = window.jupyterapp.shell.currentWidget;
  window.__kernelErrors = [];
  panel.sessionContext.session.kernel.iopubMessage.connect((_, msg) => {
    const type = msg.header.msg_type, content = msg.content;
    if (msg.parent_header && msg.parent_header.msg_type === 'execute_request') return;
    if (type === 'error') window.__kernelErrors.push(content.ename + ': ' + content.evalue);
    if (type === 'stream' && content.name === 'stderr' && /Traceback/.test(content.text))
      window.__kernelErrors.push(content.text);
  });
}"""

FAILED_CELLS = """() => {
  const panel = window.jupyterapp.shell.currentWidget;
  const failed = [];
  panel.content.widgets.forEach((cell, index) => {
    if (cell.model.type !== 'code') return;
    const tags = cell.model.getMetadata('tags') || [];
    for (const output of cell.model.outputs.toJSON()) {
      const text = output.output_type === 'stream' ? output.text : '';
      const error = output.output_type === 'error' ? output.ename + ': ' + output.evalue : '';
      if ((error && !tags.includes('raises-exception')) || /Traceback/.test(text))
        failed.push(`cell ${index}: ${error || text.slice(0, 300)}`);
    }
  });
  return failed;
}"""

IMAGES = """() => Array.from(
    window.jupyterapp.shell.currentWidget.node.querySelectorAll('.jp-MarkdownOutput img'))
  .map(img => ({src: img.getAttribute('src'), complete: img.complete, width: img.naturalWidth}))"""

SIGNATURE = """cell => Array.from(cell.querySelectorAll('.jp-OutputArea-output img'))
    .map(img => img.src).join('|')
  + '#' + Array.from(cell.querySelectorAll('.widget-html-content'))
    .map(el => el.textContent).join('|')"""

MESSAGE = """cell => Array.from(cell.querySelectorAll('.widget-html-content'))
  .map(el => el.textContent).join(' ')"""


def notebook_id(name: str) -> str:
    return name.removesuffix(".ipynb")


def groups() -> list:
    together = tuple(name for name in NOTEBOOKS if name.startswith(TRAINED_MODEL))
    alone = [(name,) for name in NOTEBOOKS if name not in together]
    return [
        pytest.param(group, id="+".join(map(notebook_id, group)))
        for group in [together, *alone]
        if group
    ]


@pytest.fixture
def page(lab, browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, device_scale_factor=1)
    page = context.new_page()
    page.not_found = []
    page.on("response", lambda r: page.not_found.append(r.url) if r.status == 404 else None)
    page.on(
        "console", lambda m: page.not_found.append(m.text) if NOT_FOUND.search(m.text) else None
    )
    yield page
    context.close()


def wait_for_change(page, cell, before: str) -> bool:
    try:
        page.wait_for_function(
            f"([cell, before]) => ({SIGNATURE})(cell) !== before",
            arg=[cell, before],
            timeout=REDRAW_TIMEOUT_MS,
        )
        return True
    except Exception:  # playwright's TimeoutError: reported as "did not redraw" below
        return False


def move(page, control, kind: str) -> str:
    """Move one control a step the way a student would; return what was done, for the report."""
    if kind == "slider":
        handle = control.locator(".noUi-handle").first
        now, top = handle.get_attribute("aria-valuenow"), handle.get_attribute("aria-valuemax")
        key = (
            "ArrowLeft"
            if now is not None and top is not None and float(now) >= float(top)
            else "ArrowRight"
        )
        handle.focus()
        page.keyboard.press(key)
        return f"slider {key}"
    if kind == "dropdown":
        select = control.locator("select")
        values = select.locator("option").evaluate_all("options => options.map(o => o.value)")
        current = select.input_value()
        target = next(v for v in values if v != current)
        select.select_option(target)
        return f"dropdown -> {target}"
    if kind == "checkbox":
        control.locator("input").click()
        return "checkbox click"
    box = control.locator("input")
    # a token more for either vocabulary: a trailing space alone is normalised away before BPE
    # (notebook 12), so the source, and rightly the picture, would not change
    box.fill(box.input_value() + " 1")
    box.press("Enter")
    return "text + ' 1', Enter"


def kind_of(classes: str) -> str:
    for kind in ("slider", "dropdown", "checkbox", "text"):
        if f"widget-{kind}" in classes:
            return kind
    raise AssertionError(classes)


@pytest.mark.parametrize("group", groups())
def test_notebook_runs_and_every_control_redraws(lab, page, group):
    for notebook in group:
        check_notebook(lab, page, notebook)


def check_notebook(lab, page, notebook: str) -> None:
    base, token, log_path = lab
    page.goto(f"{base}/lab/tree/notebooks/{notebook}?reset&token={token}")
    page.wait_for_selector(".jp-NotebookPanel .jp-Notebook", timeout=90_000)
    page.wait_for_function(
        "() => window.jupyterapp?.shell.currentWidget?.sessionContext?.session?.kernel && "
        "window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.status === 'idle'",
        timeout=90_000,
    )
    page.evaluate("""() => { window.__ranAll = false;
        window.jupyterapp.commands.execute('notebook:run-all-cells')
          .then(() => { window.__ranAll = true; }); }""")
    page.wait_for_function("() => window.__ranAll", timeout=RUN_ALL_TIMEOUT_MS, polling=1000)

    failed = page.evaluate(FAILED_CELLS)
    assert not failed, f"{notebook}: cells failed:\n" + "\n".join(failed)

    page.wait_for_function(f"() => ({IMAGES})().every(i => i.complete)", timeout=30_000)
    broken = [i["src"] for i in page.evaluate(IMAGES) if i["width"] == 0]
    assert not broken, f"{notebook}: markdown images that did not load: {broken}"

    tracebacks_before = tracebacks_shown(page)  # those of the cells that fail on purpose
    page.evaluate(HOOK_KERNEL)
    record = {
        "notebook": notebook,
        "controls_found": 0,
        "controls_redrew": 0,
        "hidden": 0,
        "moves": [],
        "bad_inputs": [],
    }
    not_redrawn = []
    cells = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell").filter(
        has=page.locator(CONTROLS)
    )
    for c in range(cells.count()):
        cell = cells.nth(c)
        cell.scroll_into_view_if_needed()
        cell_node = cell.element_handle()
        controls = cell.locator(CONTROLS)
        for i in range(controls.count()):
            control = controls.nth(i)
            if not control.is_visible():
                record["hidden"] += 1  # a control with one possible value: nothing to move
                continue
            kind = kind_of(control.get_attribute("class"))
            record["controls_found"] += 1
            if kind == "text":
                record["bad_inputs"] += check_bad_sources(page, cell_node, control, notebook)
            before = page.evaluate(SIGNATURE, cell_node)
            action = move(page, control, kind)
            redrew = wait_for_change(page, cell_node, before)
            record["controls_redrew"] += redrew
            # an empty label holds a zero-width space
            lines = control.inner_text().replace("\u200b", "").splitlines()
            label = next(
                (t.strip() for t in lines if t.strip()), control.get_attribute("title") or kind
            )
            record["moves"].append(
                {"cell": c, "control": label, "action": action, "redrew": redrew}
            )
            if not redrew:
                not_redrawn.append(f"{label} ({action})")
        page.wait_for_timeout(300)  # let the last update land before the next cell
    kernel_errors = page.evaluate("() => window.__kernelErrors")
    shown = [t for t in tracebacks_shown(page) if t not in tracebacks_before]

    OUT.mkdir(parents=True, exist_ok=True)
    # the last widget, or the title
    shown_cell = cells.last if cells.count() else page.locator(".jp-Cell").first
    shown_cell.scroll_into_view_if_needed()
    page.screenshot(path=str(OUT / f"{notebook_id(notebook)}.png"))
    (OUT / f"{notebook_id(notebook)}.json").write_text(json.dumps(record, indent=1))

    assert not not_redrawn, f"{notebook}: controls that did not redraw: {not_redrawn}"
    assert not kernel_errors, f"{notebook}: errors on the kernel's output channel: {kernel_errors}"
    assert not shown, f"{notebook}: traceback in an output area: {shown[0][:500]}"
    server_log = Path(log_path).read_text()
    assert "Exception in comm_msg" not in server_log, server_log[-2000:]
    assert not page.not_found, f"{notebook}: 404 answers: {page.not_found}"


TRACEBACKS = """() => {
  const shown = [];
  window.jupyterapp.shell.currentWidget.content.widgets.forEach(cell => {
    const tags = cell.model.getMetadata('tags') || [];
    if (cell.model.type !== 'code' || tags.includes('raises-exception')) return;
    const stderr = "[data-mime-type='application/vnd.jupyter.stderr']";
    cell.node.querySelectorAll(stderr).forEach(output => {
      if (output.innerText.includes('Traceback')) shown.push(output.innerText);
    });
  });
  return shown;
}"""


def tracebacks_shown(page) -> list[str]:
    """Tracebacks in output areas, except in cells tagged ``raises-exception`` (they fail on
    purpose, and their output may render only once scrolled to, so comparing before and after is not
    enough)."""
    return page.evaluate(TRACEBACKS)


def check_bad_sources(page, cell, control, notebook: str) -> list[dict]:
    """Type each bad source; the cell must say what is wrong in words, with no traceback; restore
    the text."""
    box = control.locator("input")
    good = box.input_value()
    seen = []
    bad = BAD_SOURCES | (
        CHARACTER_VOCAB_SOURCES if notebook.startswith(CHARACTER_VOCAB_NOTEBOOKS) else {}
    )
    for text, words in bad.items():
        box.fill(text)
        box.press("Enter")
        page.wait_for_function(
            f"([cell, words]) => ({MESSAGE})(cell).includes(words)",
            arg=[cell, words],
            timeout=REDRAW_TIMEOUT_MS,
        )
        message = page.evaluate(MESSAGE, cell).strip()
        assert "Traceback" not in message and re.search(r"[a-z]{3,} [a-z]{3,}", message), message
        seen.append({"typed": text, "message": message})
    box.fill(good)
    box.press("Enter")
    page.wait_for_function(
        f"cell => !({MESSAGE})(cell).includes('Cannot draw')", arg=cell, timeout=REDRAW_TIMEOUT_MS
    )
    return seen
