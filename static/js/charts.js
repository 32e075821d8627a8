// Overview charts (agents/charts.py): one tab stop a chart, the arrow keys (Home, End) move between its points, whose
// value then shows (CSS, on :focus); and what the reader was on survives the live refreshes that replace the section:
// the focused point, summary or link and the open data tables, found again by their keys.
(function () {
  "use strict";

  function pointsOf(chart) {
    return Array.prototype.slice.call(chart.querySelectorAll(".point"));
  }

  function moveTo(chart, point) {
    pointsOf(chart).forEach(function (each) { each.setAttribute("tabindex", each === point ? "0" : "-1"); });
    point.focus();
  }

  document.addEventListener("keydown", function (evt) {
    var point = evt.target.closest && evt.target.closest("[data-chart-points] .point");
    if (!point) return;
    var all = pointsOf(point.closest("[data-chart-points]"));
    var index = all.indexOf(point);
    var next = { ArrowRight: index + 1, ArrowDown: index + 1, ArrowLeft: index - 1, ArrowUp: index - 1, Home: 0, End: all.length - 1 }[evt.key];
    if (next === undefined) return;
    moveTo(point.closest("[data-chart-points]"), all[Math.max(0, Math.min(next, all.length - 1))]);
    evt.preventDefault();
  });

  // A click or a focus from elsewhere makes that point the chart's tab stop.
  document.addEventListener("focusin", function (evt) {
    var point = evt.target.closest && evt.target.closest("[data-chart-points] .point");
    if (point && point.getAttribute("tabindex") !== "0") moveTo(point.closest("[data-chart-points]"), point);
  });

  // What had the focus, as selectors that find it again in the new section: a chart's point by its key (one that
  // scrolled out of the chart falls back to the chart's tab stop), a data table's summary, an element's id, a link.
  function focusedSelector(section) {
    var element = section.contains(document.activeElement) ? document.activeElement : null;
    if (!element) return null;
    var point = element.closest(".point");
    if (point) {
      var chart = 'figure[aria-labelledby="' + CSS.escape(point.closest("figure").getAttribute("aria-labelledby")) + '"]';
      return { chart: chart, point: chart + ' .point[data-key="' + CSS.escape(point.dataset.key) + '"]' };
    }
    var details = element.closest("details[data-key]");
    if (details && element.tagName === "SUMMARY") return { element: 'details[data-key="' + CSS.escape(details.dataset.key) + '"] > summary' };
    if (element.id) return { element: "#" + CSS.escape(element.id) };
    if (element.matches("a[href]")) return { element: 'a[href="' + CSS.escape(element.getAttribute("href")) + '"]' };
    return null;
  }

  var kept = null;
  document.addEventListener("htmx:wsBeforeMessage", function () {
    var section = document.getElementById("overview-live");
    if (!section) return;
    kept = {
      focus: focusedSelector(section),
      open: Array.prototype.map.call(section.querySelectorAll("details[open][data-key]"), function (d) { return d.dataset.key; }),
    };
  });
  document.addEventListener("htmx:wsAfterMessage", function () {
    var section = document.getElementById("overview-live");
    if (!section || !kept) return;
    kept.open.forEach(function (key) {
      var details = section.querySelector('details[data-key="' + CSS.escape(key) + '"]');
      if (details) details.open = true;
    });
    var focus = kept.focus;
    if (focus && focus.point) {
      var point = section.querySelector(focus.point) || section.querySelector(focus.chart + ' .point[tabindex="0"]');
      if (point) moveTo(point.closest("[data-chart-points]"), point);
    } else if (focus && focus.element) {
      var element = section.querySelector(focus.element);
      if (element) element.focus();
    }
    kept = null;
  });
})();
