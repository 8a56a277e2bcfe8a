"""Small helpers shared by the browser tests."""

import re


def has_class(cls: str) -> re.Pattern:
    """For expect(...).to_have_class(): the class attribute contains `cls` as one of its classes."""
    return re.compile(rf"(^|\s){re.escape(cls)}(\s|$)")


def raw_seqs(page) -> list[int]:
    """The seqs of the raw-log messages on the page, in document order."""
    return page.eval_on_selector_all(".raw-log .msg[data-seq]", "els => els.map(e => Number(e.dataset.seq))")


def mark_page(page) -> None:
    """Set a marker on the window; `page_was_reloaded` tells whether it is gone."""
    page.evaluate("window.__ctxwebTestMarker = true")


def page_was_reloaded(page) -> bool:
    return not page.evaluate("window.__ctxwebTestMarker === true")


def show_panel(page, name: str) -> None:
    """Open one of the session page's side-rail panels ("Model input", "Checkpoints", "Event history")."""
    page.locator(".rail-nav").get_by_role("link", name=re.compile(rf"^{re.escape(name)}")).click()


def open_fold(page, name: str) -> None:
    """Open the session page's fold-bar panel `name` (metadata, trace, what-if, chart, as-of, requests)
    if it is folded; with the chart, wait for it to load (it loads when first shown)."""
    panel = page.locator(f"#fold-bar details[data-fold={name}]")
    if panel.get_attribute("open") is None:
        panel.locator("> summary").click()
    if name == "chart":
        page.locator(".chart-box figure.chart").wait_for()
