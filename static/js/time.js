// Time zones and relative times (agents/account/zones.py). Tells the server the browser's zone in the toolhub_tz
// cookie, which the pages use unless the user saved one on /account/ (the first page a browser loads, usually the
// login page, sets it; the server checks the name against the tz database). And keeps relative times true on pages
// left open: a <time data-relative datetime="ISO"> under a day old is rewritten every 30 s in Django's naturaltime
// words ("now", "a minute ago", "3 hours ago"); older ones keep the server's text.
(function () {
  "use strict";

  var zone = "";
  try { zone = Intl.DateTimeFormat().resolvedOptions().timeZone || ""; } catch (e) { zone = ""; }
  if (/^[A-Za-z0-9_+\-\/]{1,64}$/.test(zone)) {
    document.cookie = "toolhub_tz=" + zone + "; path=/; max-age=31536000; samesite=lax" +
      (location.protocol === "https:" ? "; secure" : "");
  }

  function ago(count, one, unit) {
    return count === 1 ? one + " ago" : count + "\u00a0" + unit + "s ago";  // a no-break space, as Django writes it
  }
  function relative(seconds) {
    if (seconds < 1) return "now";
    if (seconds < 60) return ago(seconds, "a second", "second");
    if (seconds < 3600) return ago(Math.floor(seconds / 60), "a minute", "minute");
    return ago(Math.floor(seconds / 3600), "an hour", "hour");
  }
  function refresh() {
    var now = Date.now();
    document.querySelectorAll("time[data-relative]").forEach(function (el) {
      var at = Date.parse(el.getAttribute("datetime"));
      var seconds = Math.floor((now - at) / 1000);
      if (!isNaN(at) && seconds >= 0 && seconds < 86400) el.textContent = relative(seconds);
    });
  }
  window.setInterval(refresh, 30000);
})();
