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
  }

  document.addEventListener("click", function (event) {
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
    if (marked) { marked.scrollIntoView({ block: "center" }); }
  }
  document.addEventListener("DOMContentLoaded", showTarget);

  // On a phone the session page's two columns ("Raw log", "Model input") become tabs. Without this script
  // they stay stacked one above the other; above 700px wide both are shown side by side and the tabs hidden.
  function setUpColumnTabs() {
    var raw = document.getElementById("raw-log-column");
    var input = document.getElementById("model-input-column");
    if (!raw || !input) { return; }
    var columns = raw.parentNode;
    var panels = [raw, input];
    var list = document.createElement("div");
    list.className = "tabs";
    list.setAttribute("role", "tablist");
    list.setAttribute("aria-label", "Session columns");
    var buttons = [["Raw log", raw], ["Model input", input]].map(function (pair, index) {
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
          panel.setAttribute("aria-labelledby", i === 0 ? "raw-title" : "input-title");
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
})();
