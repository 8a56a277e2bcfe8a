// ctxweb dashboard behaviour: selecting messages, highlighting what a checkpoint covers, following
// tool calls to their results. Event delegation, so content loaded later by htmx works the same.
(function () {
  "use strict";

  function range(el) {
    var parts = (el.getAttribute("data-covers") || "").split("-");
    return [parseInt(parts[0], 10), parseInt(parts[1], 10)];
  }

  // System messages (instructions) are never covered by a checkpoint, even inside its range.
  function highlightRange(lo, hi, on) {
    document.querySelectorAll(".raw-log .msg[data-seq]").forEach(function (msg) {
      var seq = parseInt(msg.getAttribute("data-seq"), 10);
      var covered = seq >= lo && seq <= hi && !msg.classList.contains("role-system");
      msg.classList.toggle("highlight", on && covered);
    });
  }

  function clearHighlights() {
    document.querySelectorAll(".highlight").forEach(function (el) { el.classList.remove("highlight"); });
  }

  // Hovering or selecting a checkpoint (its summary in the model input, its entry in the list, a
  // covered range in the events) highlights exactly the raw messages it covers.
  function onCheckpointEnter(el) {
    var r = range(el);
    highlightRange(r[0], r[1], true);
    el.classList.add("highlight");
  }

  // Hovering a covered raw message highlights the summary that replaced it and its checkpoint.
  function onCoveredEnter(msg) {
    var seq = parseInt(msg.getAttribute("data-seq"), 10);
    document.querySelectorAll(".model-input [data-covers], .checkpoints [data-covers]").forEach(function (el) {
      var r = range(el);
      if (seq >= r[0] && seq <= r[1]) { el.classList.add("highlight"); }
    });
    msg.classList.add("highlight");
  }

  var pinned = null;

  document.addEventListener("mouseover", function (event) {
    if (pinned) { return; }
    var cp = event.target.closest("[data-covers]");
    if (cp) { clearHighlights(); onCheckpointEnter(cp); return; }
    var msg = event.target.closest(".raw-log .msg[data-checkpoint]");
    if (msg) { clearHighlights(); onCoveredEnter(msg); }
  });

  document.addEventListener("mouseout", function (event) {
    if (pinned) { return; }
    var from = event.target.closest("[data-covers], .raw-log .msg[data-checkpoint]");
    if (from && !from.contains(event.relatedTarget)) { clearHighlights(); }
  });

  document.addEventListener("focusin", function (event) {
    var cp = event.target.closest("[data-covers]");
    if (cp && !pinned) { clearHighlights(); onCheckpointEnter(cp); }
  });

  function jump(seq, href, callId) {
    var target = document.getElementById("m-" + seq);
    if (!target) { window.location.href = href; return; }
    // A tall message with many tool calls: land on the call itself, not the middle of the message.
    var call = null;
    if (callId) {
      target.querySelectorAll(".tool-call[data-call-id]").forEach(function (el) {
        if (el.getAttribute("data-call-id") === callId) { call = el; }
      });
    }
    (call || target).scrollIntoView({ behavior: "smooth", block: call ? "center" : "start" });
    target.classList.remove("flash");
    void target.offsetWidth;
    target.classList.add("flash", "selected");
    history.replaceState(null, "", "#m-" + seq);
    showCounterpart(target);
  }

  document.addEventListener("click", function (event) {
    if (navigationClick(event)) { return; }
    var link = event.target.closest("a[data-jump]");
    if (link) {
      event.preventDefault();
      jump(link.getAttribute("data-jump"), link.getAttribute("href"), link.getAttribute("data-call"));
      return;
    }
    var cp = event.target.closest("[data-covers]");
    if (cp && !event.target.closest("a")) {
      // Clicking a checkpoint pins its highlight; clicking it again releases it.
      if (pinned === cp) { pinned = null; clearHighlights(); return; }
      pinned = null; clearHighlights(); onCheckpointEnter(cp); pinned = cp;
      return;
    }
    if (event.target.closest("a, button, form, summary, input, select, details, pre")) { return; }
    var msg = event.target.closest(".raw-log .msg");
    if (msg) {
      // Selecting a raw message shows why it is (or is not) in the model input.
      msg.classList.toggle("selected");
      if (msg.classList.contains("selected") && msg.getAttribute("data-checkpoint")) {
        pinned = null; clearHighlights(); onCoveredEnter(msg);
      }
      if (msg.classList.contains("selected")) { current = msg; showCounterpart(msg); }
    }
  });

  document.addEventListener("keydown", function (event) {
    if (event.key === "Enter" && event.target.matches(".raw-log .msg")) { event.target.classList.toggle("selected"); }
    if (event.key === "Escape") { pinned = null; clearHighlights(); }
  });

  document.addEventListener("change", function (event) {
    if (event.target.matches("select[data-autosubmit]")) { event.target.form.submit(); }
  });

  function showTarget() {
    var marked = document.querySelector(".raw-log .msg.target");
    if (marked) { marked.scrollIntoView({ block: "center" }); current = marked; showCounterpart(marked); }
  }
  document.addEventListener("DOMContentLoaded", showTarget);

  // --- Navigation (issue 17): the side rail's panels, links from a message to what it names, the
  // counterpart of a selected message in the model input, the go-to box and the j/k keys.

  var current = null;  // the raw message j/k move from

  function rail() { return document.getElementById("side-rail"); }

  // With the script the side rail shows one panel at a time (model input, checkpoints, event history);
  // without it they are stacked and its nav links are plain anchors.
  function showPanel(id) {
    var side = rail();
    if (!side || !side.classList.contains("paneled")) { return; }
    side.querySelectorAll(".rail-panel").forEach(function (panel) { panel.hidden = panel.id !== id; });
    side.querySelectorAll(".rail-nav a[data-panel]").forEach(function (link) {
      if (link.getAttribute("data-panel") === id) { link.setAttribute("aria-current", "true"); }
      else { link.removeAttribute("aria-current"); }
    });
  }

  function setUpRail() {
    var side = rail();
    if (!side) { return; }
    side.classList.add("paneled");
    var hash = window.location.hash.slice(1);
    var start = document.getElementById(hash);
    var panel = start && start.closest(".rail-panel");
    showPanel(panel ? panel.id : "model-input-column");
    if (panel && start !== panel) { reveal(start); }
  }
  document.addEventListener("DOMContentLoaded", setUpRail);

  // On a phone the rail is a tab of its own: show it before scrolling to something in it.
  function showRailTab() {
    var side = rail();
    var tab = document.getElementById("side-rail-tab");
    if (side && side.hidden && tab) { tab.click(); }
  }

  // Whether the rail scrolls on its own (wide screens: it sits beside the raw log and stays in view).
  function railScrolls(side) {
    return side.scrollHeight > side.clientHeight + 1 && getComputedStyle(side).overflowY !== "visible";
  }

  // Scroll `el` into view inside the rail when the rail scrolls on its own (wide screens), else the page.
  function scrollInRail(el, block) {
    var side = rail();
    if (side && side.contains(el) && railScrolls(side)) {
      var nav = side.querySelector(".rail-nav");
      var offset = el.getBoundingClientRect().top - side.getBoundingClientRect().top - (nav ? nav.offsetHeight : 0) - 8;
      if (block === "center") { offset -= Math.max(0, (side.clientHeight - el.offsetHeight) / 2 - 40); }
      side.scrollTop += offset;
    } else {
      el.scrollIntoView({ block: "start" });
    }
  }

  function flash(el) {
    el.classList.remove("flash");
    void el.offsetWidth;
    el.classList.add("flash");
  }

  // Show something in the rail (a summary, an event): its panel, scrolled to it, flashed and focused.
  function reveal(el) {
    var panel = el.closest(".rail-panel");
    showRailTab();
    if (panel) { showPanel(panel.id); }
    scrollInRail(el);
    flash(el);
    el.focus({ preventScroll: true });
  }

  // A selected raw message's counterpart in the model input: the same message, or the summary that
  // covers it; scrolled into view inside the rail, without moving the page.
  function showCounterpart(msg) {
    var side = rail();
    // Stacked under the log (narrow windows, phones) the rail is out of sight: the page stays put.
    if (!side || side.hidden || getComputedStyle(side).position !== "sticky") { return; }
    var seq = msg.getAttribute("data-seq");
    var target = msg.getAttribute("data-checkpoint") ? document.getElementById("input-summary")
      : document.getElementById("input-m-" + seq);
    document.querySelectorAll(".entry.counterpart").forEach(function (el) { el.classList.remove("counterpart"); });
    if (!target) { return; }
    showPanel("model-input-column");
    target.classList.add("counterpart");
    scrollInRail(target, "center");
  }

  function navigationClick(event) {
    var link = event.target.closest("a[data-summary]");
    if (link) {
      var summary = document.getElementById("input-summary");
      if (!summary) { return false; }
      event.preventDefault();
      var msg = link.closest(".raw-log .msg");
      if (msg) { msg.classList.add("selected"); current = msg; }
      reveal(summary);
      pinned = null; clearHighlights(); onCheckpointEnter(summary); pinned = summary;
      return true;
    }
    link = event.target.closest("a[data-event]");
    if (link) {
      var item = document.getElementById("event-" + link.getAttribute("data-event"));
      if (!item) { return false; }  // not among the loaded events: the link opens the event's record
      event.preventDefault();
      reveal(item);
      return true;
    }
    link = event.target.closest("a[data-counterpart]");
    if (link) {
      var entry = document.getElementById("input-m-" + link.getAttribute("data-counterpart"));
      if (!entry) { return false; }
      event.preventDefault();
      reveal(entry);
      return true;
    }
    link = event.target.closest(".rail-nav a[data-panel]");
    if (link) {
      event.preventDefault();
      showPanel(link.getAttribute("data-panel"));
      rail().scrollTop = 0;
      return true;
    }
    var toggle = event.target.closest("button.expand-summary");
    if (toggle) {
      var text = document.getElementById(toggle.getAttribute("aria-controls"));
      var open = toggle.getAttribute("aria-expanded") !== "true";
      text.classList.toggle("expanded", open);
      toggle.setAttribute("aria-expanded", String(open));
      toggle.textContent = open ? "Show less of the summary" : "Show the whole summary";
      return true;
    }
    return false;
  }

  // A summary longer than its box gets a "show all" toggle (hidden when it fits).
  function setUpSummaryToggles(root) {
    (root || document).querySelectorAll("button.expand-summary").forEach(function (toggle) {
      var text = document.getElementById(toggle.getAttribute("aria-controls"));
      if (text && (text.scrollHeight > text.clientHeight + 1 || text.classList.contains("expanded"))) { toggle.hidden = false; }
    });
  }
  document.addEventListener("DOMContentLoaded", function () { setUpSummaryToggles(); });
  document.addEventListener("htmx:afterSettle", function (event) { setUpSummaryToggles(event.target); });

  // Make `msg` the one selected message: scrolled into view, focused, in the address bar.
  function selectMessage(msg) {
    document.querySelectorAll(".raw-log .msg.selected").forEach(function (el) {
      if (el !== msg) { el.classList.remove("selected"); }
    });
    msg.classList.add("selected");
    current = msg;
    msg.focus({ preventScroll: true });
    msg.scrollIntoView({ block: "start" });
    history.replaceState(null, "", "#" + msg.id);
    if (msg.getAttribute("data-checkpoint")) { pinned = null; clearHighlights(); onCoveredEnter(msg); }
    showCounterpart(msg);
  }

  function firstInView(messages) {
    for (var i = 0; i < messages.length; i++) {
      if (messages[i].getBoundingClientRect().bottom > 0) { return i; }
    }
    return messages.length - 1;
  }

  function step(delta) {
    var messages = Array.prototype.slice.call(document.querySelectorAll(".raw-log .msg[data-seq]"));
    if (!messages.length) { return; }
    var at = current && document.body.contains(current) ? messages.indexOf(current) : -1;
    var next = at < 0 ? firstInView(messages) : at + delta;
    if (next < 0 || next >= messages.length) {
      // Past the loaded window: load the next one, then move on into it.
      var more = document.querySelector(delta > 0 ? ".raw-log button.more-later" : ".raw-log button.more-earlier");
      if (more && !pendingStep) { pendingStep = delta; more.click(); }
      return;
    }
    selectMessage(messages[next]);
  }

  var pendingStep = 0;
  document.addEventListener("htmx:afterSettle", function (event) {
    var items = document.getElementById("raw-items");
    if (!pendingStep || !items || !(items === event.target || items.contains(event.target))) { return; }
    var delta = pendingStep;
    pendingStep = 0;
    step(delta);
  });

  function typing(el) {
    return el && (el.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(el.tagName));
  }

  document.addEventListener("keydown", function (event) {
    if (event.defaultPrevented || event.ctrlKey || event.metaKey || event.altKey || typing(event.target)) { return; }
    if (!document.getElementById("raw-items")) { return; }
    if (event.key === "j") { step(1); event.preventDefault(); }
    else if (event.key === "k") { step(-1); event.preventDefault(); }
  });

  // The go-to box: a message already on the page is selected in place; else the form loads ?seq=N.
  document.addEventListener("submit", function (event) {
    var form = event.target;
    if (!form.matches("form.go-to")) { return; }
    var msg = document.getElementById("m-" + parseInt(form.elements.seq.value, 10));
    if (msg && msg.closest(".raw-log")) {
      event.preventDefault();
      selectMessage(msg);
      flash(msg);
    }
  });

  // On a phone the session page's two columns ("Raw log", "Model input") become tabs. Without this script
  // they stay stacked one above the other; above 700px wide both are shown side by side and the tabs hidden.
  function setUpColumnTabs() {
    var raw = document.getElementById("raw-log-column");
    var input = document.getElementById("side-rail") || document.getElementById("model-input-column");
    if (!raw || !input) { return; }
    var columns = raw.parentNode;
    var panels = [raw, input];
    var list = document.createElement("div");
    list.className = "tabs";
    list.setAttribute("role", "tablist");
    list.setAttribute("aria-label", "Session columns");
    var buttons = [["Raw log", raw], [input.id === "side-rail" ? "Model input · checkpoints" : "Model input", input]].map(function (pair, index) {
      var button = document.createElement("button");
      button.type = "button";
      button.id = pair[1].id + "-tab";
      button.textContent = pair[0];
      button.setAttribute("role", "tab");
      button.setAttribute("aria-controls", pair[1].id);
      button.addEventListener("click", function () { select(index); });
      list.appendChild(button);
      return button;
    });
    list.addEventListener("keydown", function (event) {
      if (event.key !== "ArrowRight" && event.key !== "ArrowLeft") { return; }
      var next = buttons.indexOf(document.activeElement) === 0 ? 1 : 0;
      select(next); buttons[next].focus(); event.preventDefault();
    });
    columns.parentNode.insertBefore(list, columns);
    var narrow = window.matchMedia("(max-width: 700px)");
    var current = 0;
    function select(index) {
      current = index;
      buttons.forEach(function (button, i) {
        button.setAttribute("aria-selected", String(i === index));
        button.tabIndex = i === index ? 0 : -1;
      });
      panels.forEach(function (panel, i) {
        if (narrow.matches) {
          panel.setAttribute("role", "tabpanel");
          panel.setAttribute("aria-labelledby", buttons[i].id);
          panel.hidden = i !== index;
        } else {
          panel.removeAttribute("role");
          if (panel.id === "side-rail") { panel.removeAttribute("aria-labelledby"); }  // a plain div: its sections have headings
          else { panel.setAttribute("aria-labelledby", i === 0 ? "raw-title" : "input-title"); }
          panel.hidden = false;
        }
      });
    }
    columns.classList.add("tabbed");
    narrow.addEventListener("change", function () { select(current); });
    select(0);
  }
  document.addEventListener("DOMContentLoaded", setUpColumnTabs);

  // A box that scrolls (a long message, tool arguments, the event history) can be reached with Tab and
  // scrolled with the arrow keys: it gets tabindex=0 and a label, but only when it really overflows.
  var SCROLL_BOXES = ".text, .arguments, .timeline, .lost-facts-list";
  function makeScrollBoxesFocusable(root) {
    (root || document).querySelectorAll(SCROLL_BOXES).forEach(function (box) {
      if (box.hasAttribute("tabindex") || box.scrollHeight <= box.clientHeight + 1) { return; }
      box.tabIndex = 0;
      if (box.tagName !== "OL" && box.tagName !== "UL") { box.setAttribute("role", "region"); }  // a list stays a list
      var owner = box.closest("[id^=m-], .entry, .msg");
      box.setAttribute("aria-label", "scrollable " + (box.classList.contains("arguments") ? "tool arguments" :
        box.classList.contains("timeline") ? "event history" : "text") + (owner && owner.id ? " of message " + owner.id.slice(2) : ""));
    });
  }
  document.addEventListener("DOMContentLoaded", function () { makeScrollBoxesFocusable(); });
  document.addEventListener("htmx:afterSettle", function (event) { makeScrollBoxesFocusable(event.target); });

  // The What if… panel: its answer marks the raw messages a compaction with those settings would cover
  // (again whenever more of the raw log is loaded), and a refused preview (422) still shows its error.
  function markWhatIf() {
    var answer = document.querySelector("#what-if-result[data-first-seq]");
    var lo = answer ? parseInt(answer.getAttribute("data-first-seq"), 10) : NaN;
    var hi = answer ? parseInt(answer.getAttribute("data-last-seq"), 10) : NaN;
    document.querySelectorAll(".raw-log .msg[data-seq]").forEach(function (msg) {
      var seq = parseInt(msg.getAttribute("data-seq"), 10);
      var covered = seq >= lo && seq <= hi && !msg.classList.contains("role-system");
      msg.classList.toggle("what-if-covered", covered);
      var badge = msg.querySelector(":scope > header > .what-if-badge");
      if (covered && !badge) {
        badge = document.createElement("span");
        badge.className = "badge what-if-badge";
        badge.textContent = "would be covered";
        msg.querySelector(":scope > header").insertBefore(badge, msg.querySelector(":scope > header > .tokens"));
      } else if (!covered && badge) {
        badge.remove();
      }
    });
  }
  document.addEventListener("htmx:afterSettle", markWhatIf);
  document.addEventListener("DOMContentLoaded", markWhatIf);
  document.addEventListener("htmx:beforeSwap", function (event) {
    if (event.detail.xhr.status === 422 && event.detail.target && event.detail.target.id === "what-if-result") {
      event.detail.shouldSwap = true;
      event.detail.isError = false;
    }
  });
})();

// Long texts are folded to a preview (templates/sessions/_text.html): the rest is hidden="until-found",
// so the browser's find reveals it by itself ("beforematch"); "Show all" reveals it, and folds it again.
(function () {
  "use strict";

  function setFolded(text, folded) {
    var rest = text.querySelector(":scope > .fold-rest");
    if (!rest) { return; }
    if (folded) { rest.setAttribute("hidden", "until-found"); } else { rest.removeAttribute("hidden"); }
    text.classList.toggle("unfolded", !folded);
    var note = text.nextElementSibling;
    var button = note && note.querySelector(".fold-toggle");
    if (button) {
      button.setAttribute("aria-expanded", folded ? "false" : "true");
      button.firstChild.nodeValue = folded ? "Show all " : "Fold ";
    }
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest(".fold-toggle");
    if (!button) { return; }
    var text = button.closest(".fold-note").previousElementSibling;
    if (text && text.classList.contains("folded")) { setFolded(text, text.classList.contains("unfolded")); }
  });

  document.addEventListener("beforematch", function (event) {
    var text = event.target.closest && event.target.closest(".text.folded");
    if (text) { setFolded(text, false); }
  }, true);

  // A page opened to look for a term (?q=term) shows whole every folded text holding it.
  function unfoldMatches(root) {
    var term = (new URLSearchParams(window.location.search).get("q") || "").trim().toLowerCase();
    if (!term) { return; }
    (root || document).querySelectorAll(".text.folded").forEach(function (text) {
      if (text.textContent.toLowerCase().indexOf(term) !== -1) { setFolded(text, false); }
    });
  }
  document.addEventListener("DOMContentLoaded", function () { unfoldMatches(document); });
  document.addEventListener("htmx:afterSettle", function (event) { unfoldMatches(event.target); });


  // Coming from a search hit (?seq=N&q=words, or ?q=words#session-note-ID): the words are marked in that
  // message's text and notes, as the search page marks them. Text nodes are split and <mark> elements
  // made with the DOM (no HTML is parsed), so nothing in a message or the query can run as script.
  var STOP_WORDS = ["a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "in", "is", "it", "of",
    "on", "or", "that", "the", "this", "to", "was", "with"];
  var WORD = /[\p{L}\p{N}_]+/gu;

  function escapeRegExp(text) { return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"); }

  function termPattern(query) {
    var terms = (query.match(WORD) || []).slice(0, 12).map(function (t) { return t.toLowerCase(); });
    var words = terms.filter(function (t) { return STOP_WORDS.indexOf(t) < 0; });
    if (!words.length) { words = terms; }
    if (!words.length) { return null; }
    words.sort(function (a, b) { return b.length - a.length; });
    var phrase = query.trim().split(/\s+/).join(" ");
    var parts = terms.length > 1 ? [escapeRegExp(phrase)] : [];
    words.forEach(function (w) { parts.push("(?<![\\p{L}\\p{N}_])" + escapeRegExp(w) + "[\\p{L}\\p{N}_]*"); });
    return new RegExp(parts.join("|"), "giu");
  }

  function markTerms(root, pattern) {
    var walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
    var nodes = [];
    while (walker.nextNode()) { nodes.push(walker.currentNode); }
    var count = 0;
    nodes.forEach(function (node) {
      var text = node.nodeValue;
      pattern.lastIndex = 0;
      var match, pos = 0, pieces = [];
      while ((match = pattern.exec(text)) !== null) {
        if (!match[0]) { pattern.lastIndex += 1; continue; }
        pieces.push(document.createTextNode(text.slice(pos, match.index)));
        var mark = document.createElement("mark");
        mark.className = "search-term";
        mark.textContent = match[0];
        pieces.push(mark);
        pos = match.index + match[0].length;
        count += 1;
      }
      if (!pieces.length) { return; }
      pieces.push(document.createTextNode(text.slice(pos)));
      var parent = node.parentNode;
      pieces.forEach(function (piece) { parent.insertBefore(piece, node); });
      parent.removeChild(node);
    });
    return count;
  }

  function markSearchTerms() {
    var params = new URLSearchParams(window.location.search);
    var query = (params.get("q") || "").slice(0, 200);
    if (!query.trim()) { return; }
    var seq = params.get("seq");
    var target = seq ? document.getElementById("m-" + seq) :
      (window.location.hash.indexOf("#session-note-") === 0 ? document.getElementById(window.location.hash.slice(1)) : null);
    var pattern = termPattern(query);
    if (!target || !pattern) { return; }
    var boxes = target.matches(".note") ? [target.querySelector(".text")] :
      Array.prototype.slice.call(target.querySelectorAll(".body, .notes .text, .tool-call .arguments"));
    boxes.forEach(function (box) { if (box) { markTerms(box, pattern); } });
  }
  document.addEventListener("DOMContentLoaded", markSearchTerms);

  // "copy link" beside a message's permalink copies its absolute address; without this script it is a
  // plain link to the same address.
  function copyStatus(link) {
    var status = link.nextElementSibling;
    if (!status || !status.classList.contains("copy-status")) {
      status = document.createElement("span");
      status.className = "copy-status small";
      status.setAttribute("role", "status");
      link.parentNode.insertBefore(status, link.nextSibling);
    }
    return status;
  }

  function copyFallback(text) {
    var area = document.createElement("textarea");
    area.value = text;
    area.setAttribute("readonly", "");
    area.className = "visually-hidden";
    document.body.appendChild(area);
    area.select();
    var done = false;
    try { done = document.execCommand("copy"); } catch (e) { done = false; }
    document.body.removeChild(area);
    return done;
  }

  document.addEventListener("click", function (event) {
    var link = event.target.closest("a[data-copy-link]");
    if (!link) { return; }
    event.preventDefault();
    var url = new URL(link.getAttribute("href"), window.location.href).href;
    var status = copyStatus(link);
    function done(ok) {
      status.textContent = ok ? "copied" : "could not copy: " + url;
      clearTimeout(status._timer);
      if (ok) { status._timer = setTimeout(function () { status.textContent = ""; }, 4000); }
    }
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(url).then(function () { done(true); }, function () { done(copyFallback(url)); });
    } else {
      done(copyFallback(url));
    }
  });


  // The size chart's readout: the point under the pointer, or the drop reached with Tab, as
  // "#N · T tokens", read from the chart's data-readings ("seq tokens x y;..." in viewBox units).
  function chartReadings(svg) {
    if (!svg.chartReadings) {
      svg.chartReadings = (svg.getAttribute("data-readings") || "").split(";").filter(Boolean).map(function (r) {
        var v = r.split(" ").map(Number);
        return { seq: v[0], tokens: v[1], x: v[2], y: v[3] };
      });
    }
    return svg.chartReadings;
  }

  function showReading(svg, reading, note) {
    var pointer = svg.querySelector(".pointer");
    var guide = pointer.querySelector("line"), dot = pointer.querySelector("circle");
    guide.setAttribute("x1", reading.x); guide.setAttribute("x2", reading.x);
    dot.setAttribute("cx", reading.x); dot.setAttribute("cy", reading.y);
    pointer.classList.add("on");
    var readout = svg.closest("figure").querySelector(".chart-readout");
    readout.textContent = "#" + reading.seq + " · " + reading.tokens.toLocaleString("en") + " tokens" + (note || "");
    readout.classList.remove("muted");
  }

  function hideReading(svg) {
    svg.querySelector(".pointer").classList.remove("on");
    var readout = svg.closest("figure").querySelector(".chart-readout");
    readout.textContent = readout.getAttribute("data-hint");
    readout.classList.add("muted");
  }

  function readUnderPointer(event) {
    var svg = event.target.closest && event.target.closest(".chart svg[data-readings]");
    if (!svg || !svg.getScreenCTM()) { return; }
    var at = svg.createSVGPoint();
    at.x = event.clientX; at.y = event.clientY;
    at = at.matrixTransform(svg.getScreenCTM().inverse());
    var nearest = null, best = Infinity;
    chartReadings(svg).forEach(function (r) {
      // Nearest along x; at a drop (two readings at one x) the one nearer the pointer in height.
      var distance = Math.abs(r.x - at.x) * 1000 + Math.abs(r.y - at.y);
      if (distance < best) { best = distance; nearest = r; }
    });
    if (nearest) { showReading(svg, nearest); }
  }
  document.addEventListener("pointermove", readUnderPointer);
  document.addEventListener("pointerdown", readUnderPointer);  // a tap on a phone

  document.addEventListener("pointerout", function (event) {
    if (event.pointerType === "touch") { return; }  // a finger lifted: the reading stays
    var svg = event.target.closest && event.target.closest(".chart svg[data-readings]");
    if (svg && !svg.contains(event.relatedTarget) && !svg.contains(document.activeElement)) { hideReading(svg); }
  });

  document.addEventListener("focusin", function (event) {
    var drop = event.target.closest(".chart a[data-seq]");
    if (!drop) { return; }
    var circle = drop.querySelector("circle");
    showReading(drop.closest("svg"), {
      seq: Number(drop.getAttribute("data-seq")), tokens: Number(drop.getAttribute("data-tokens")),
      x: Number(circle.getAttribute("cx")), y: Number(circle.getAttribute("cy")),
    }, " after a compaction (Enter shows what it changed)");
  });

  document.addEventListener("focusout", function (event) {
    var drop = event.target.closest(".chart a[data-seq]");
    if (drop && !(event.relatedTarget && event.relatedTarget.closest && event.relatedTarget.closest(".chart a[data-seq]"))) {
      hideReading(drop.closest("svg"));
    }
  });

  // On a phone the chart scrolls inside its box: bring the "as of" point into view.
  document.addEventListener("htmx:afterSettle", function (event) {
    var mark = event.target.querySelector && event.target.querySelector(".chart .as-of-point circle");
    if (!mark) { return; }
    var plot = mark.closest(".chart-plot");
    if (plot.scrollWidth <= plot.clientWidth) { return; }
    var box = mark.getBoundingClientRect(), frame = plot.getBoundingClientRect();
    plot.scrollLeft += box.left - frame.left - plot.clientWidth / 2;
  });
}());

// The header's menu on a phone (templates/base.html .topbar-menu, a <details>): Escape closes it and puts
// the focus back on its button; a click outside it closes it too. Wider than a phone it is always shown.
(function () {
  "use strict";
  function openMenu() { return document.querySelector(".topbar-menu[open]"); }
  document.addEventListener("keydown", function (event) {
    var menu = openMenu();
    if (event.key !== "Escape" || !menu) { return; }
    menu.open = false;
    menu.querySelector("summary").focus();
  });
  document.addEventListener("click", function (event) {
    var menu = openMenu();
    if (menu && !menu.contains(event.target)) { menu.open = false; }
  });
}());

// The session page's fold bar (templates/sessions/detail.html): a panel the user opens or folds stays so for
// that user, on every session page and device (sessions/dashboard/preferences.py). The page renders the
// stored state; only a toggle after load is posted (a panel opened by the address, a trace link, is not).
(function () {
  "use strict";
  var bar = document.getElementById("fold-bar");
  if (!bar || !bar.dataset.stateUrl || !window.fetch) { return; }
  var ready = false;
  window.addEventListener("load", function () { setTimeout(function () { ready = true; }, 0); });
  bar.querySelectorAll("details.fold-panel[data-fold]").forEach(function (panel) {
    panel.addEventListener("toggle", function () {
      if (!ready) { return; }
      var body = new URLSearchParams();
      body.set("panel", panel.getAttribute("data-fold"));
      body.set("open", panel.open ? "1" : "0");
      fetch(bar.dataset.stateUrl, {method: "POST", body: body, credentials: "same-origin",
                                   headers: {"X-CSRFToken": bar.dataset.csrf}}).catch(function () {});
    });
  });
}());
