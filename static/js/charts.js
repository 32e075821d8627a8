// Overview charts (agents/charts.py): one tab stop a chart, the arrow keys (Home, End) move between its points, whose
// value then shows (CSS, on :focus); and what the reader was on survives the live refreshes that replace the section:
// the focused point and the open data tables, found again by their data-key.
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

  var kept = null;
  document.addEventListener("htmx:wsBeforeMessage", function () {
    var section = document.getElementById("overview-live");
    if (!section) return;
    var focused = section.contains(document.activeElement) ? document.activeElement.closest(".point") : null;
    kept = {
      chart: focused ? focused.closest("figure").getAttribute("aria-labelledby") : null,
      point: focused ? focused.dataset.key : null,
      open: Array.prototype.map.call(section.querySelectorAll("details[open][data-key]"), function (d) { return d.dataset.key; }),
    };
  });
  document.addEventListener("htmx:wsAfterMessage", function () {
    var section = document.getElementById("overview-live");
    if (!section || !kept) return;
    kept.open.forEach(function (key) {
      var details = section.querySelector('details[data-key="' + key + '"]');
      if (details) details.open = true;
    });
    if (kept.point) {
      var figure = section.querySelector('figure[aria-labelledby="' + kept.chart + '"]');
      // A minute or a request that scrolled out of the chart: its tab stop (the latest) instead.
      var point = figure && (figure.querySelector('.point[data-key="' + kept.point + '"]') || figure.querySelector('.point[tabindex="0"]'));
      if (point) moveTo(point.closest("[data-chart-points]"), point);
    }
    kept = null;
  });
})();
