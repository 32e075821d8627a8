// toolhub console, overview, approvals, routing log, workflows and knowledge pages: live-connection state, J/K row
// keys, a conversation's Send (disabled while a turn runs, Ctrl/Cmd+Enter), approval countdowns, and swapping 409
// and 400 answers (a closed approval, a stale workflow version, a stale undo) so their message shows.
(function () {
  "use strict";

  function setLiveState(text, state) {
    document.querySelectorAll("[data-live-state]").forEach(function (el) {
      el.textContent = text;
      el.dataset.state = state;
    });
    document.body.dataset.live = state;
  }
  document.addEventListener("htmx:wsOpen", function () { setLiveState("live", "open"); });
  document.addEventListener("htmx:wsClose", function () { setLiveState("disconnected: reconnecting…", "closed"); });
  document.addEventListener("htmx:wsAfterMessage", function () { document.body.dataset.liveMessages = String(Number(document.body.dataset.liveMessages || 0) + 1); });

  // A conversation's Send is disabled while one of its turns has not ended (the server renders the state the
  // page starts with): the turn just sent (data-turn) until its card arrives, then the live statuses decide.
  function syncSend() {
    var send = document.getElementById("chat-send");
    if (!send) return;
    var sent = send.dataset.turn;
    send.disabled = (sent && !document.getElementById("turn-" + sent)) ||
      !!document.querySelector("#thread .turn-status.status-queued, #thread .turn-status.status-running, #thread .turn-status.status-waiting");
    var why = document.getElementById("chat-send-why");  // the line that says why Send is disabled, while it is
    if (why) why.hidden = !send.disabled;
  }
  document.addEventListener("htmx:wsAfterMessage", syncSend);
  document.addEventListener("htmx:afterSwap", syncSend);

  // Ctrl+Enter (⌘+Enter on a Mac) in a message box sends, as Send would (nothing while Send is disabled): a
  // conversation's (form#chat) and the console's "Start a conversation" (form.chat).
  document.addEventListener("keydown", function (evt) {
    if (evt.key !== "Enter" || !(evt.ctrlKey || evt.metaKey) || !evt.target.closest) return;
    var form = evt.target.closest("form#chat, form.chat");
    if (!form) return;
    var send = form.id === "chat" ? document.getElementById("chat-send") : form.querySelector("button[type=submit]");
    if (!send) return;
    evt.preventDefault();
    if (!send.disabled) form.requestSubmit(send);
  });

  // A deep link to a turn (/console/<id>/#turn-<n>, from the turn search or a tool's activity) scrolls to it and
  // focuses it: when the page loads, when the hash changes (another turn's link on the same page), and once more
  // when the socket's first message (the live thread) replaces the page's copy, whichever of these came first.
  function showTargetTurn() {
    if (!/^#turn-\d+$/.test(window.location.hash)) return;
    var turn = document.getElementById(window.location.hash.slice(1));
    if (!turn) return;
    var fold = turn.closest("details.turn-fold");  // an older turn folded to its summary line opens
    if (fold) fold.open = true;
    turn.setAttribute("tabindex", "-1");
    turn.scrollIntoView({ block: "start" });
    turn.focus({ preventScroll: true });
  }
  var liveThreadShown = false;
  document.addEventListener("DOMContentLoaded", showTargetTurn);
  document.addEventListener("htmx:wsAfterMessage", function () {
    if (liveThreadShown) return;  // later live events leave the reader where they are
    liveThreadShown = true;
    showTargetTurn();
  });
  window.addEventListener("hashchange", showTargetTurn);

  document.addEventListener("htmx:beforeSwap", function (evt) {
    if (evt.detail.xhr && (evt.detail.xhr.status === 409 || evt.detail.xhr.status === 400)) {
      evt.detail.shouldSwap = true;
      evt.detail.isError = false;
    }
  });

  // An approval's countdown to its deadline ([data-countdown], an ISO time the server rendered): "in 4 min 12 s".
  function countdownText(ms) {
    if (ms <= 0) return "deadline passed";
    var seconds = Math.round(ms / 1000), minutes = Math.floor(seconds / 60);
    return "in " + (minutes ? minutes + " min " : "") + (seconds % 60) + " s";
  }
  function tickCountdowns() {
    var now = Date.now();
    document.querySelectorAll("[data-countdown]").forEach(function (el) {
      var at = Date.parse(el.dataset.countdown);
      if (!isNaN(at)) el.textContent = countdownText(at - now);
    });
  }
  window.setInterval(tickCountdowns, 1000);
  document.addEventListener("DOMContentLoaded", tickCountdowns);

  // The approvals inbox follows /ws/approvals/ ([data-approvals-socket]): each message becomes the approvals-changed
  // event its htmx refresh listens for. While the socket is down it reconnects after 1, 2, 4 ... 30 s (not after a
  // refusal: 4403); the inbox's slow poll goes on meanwhile.
  function followApprovals() {
    var region = document.querySelector("[data-approvals-socket]");
    if (!region || !window.WebSocket) return;
    var url = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + region.dataset.approvalsSocket;
    var delay = 1000;
    function connect() {
      var socket = new WebSocket(url);
      socket.onopen = function () { delay = 1000; document.body.dataset.approvalsSocket = "open"; };
      socket.onmessage = function () { document.body.dispatchEvent(new CustomEvent("approvals-changed")); };
      socket.onclose = function (evt) {
        document.body.dataset.approvalsSocket = "closed";
        if (evt.code === 4403) return;
        window.setTimeout(connect, delay);
        delay = Math.min(delay * 2, 30000);
      };
    }
    connect();
  }
  document.addEventListener("DOMContentLoaded", followApprovals);

  // A polled region ([data-keep-while-used], the approvals inbox) is not refreshed while the keyboard is inside it
  // or a field in it holds text, so a refresh never takes the focus, a half-typed deny reason or answer away:
  // neither asked for then, nor swapped in when it was asked for before the typing began and answers during it.
  function keptWhileUsed(region) {
    if (!region || !region.hasAttribute || !region.hasAttribute("data-keep-while-used")) return false;
    var inUse = region.contains(document.activeElement) && document.activeElement !== region;
    var fields = region.querySelectorAll("input[type=text], input[type=number], input[type=email], input[type=url], textarea");
    var typed = Array.prototype.some.call(fields, function (input) { return input.value; });
    return inUse || typed;
  }
  document.addEventListener("htmx:beforeRequest", function (evt) {
    if (keptWhileUsed(evt.detail.elt)) evt.preventDefault();
  });
  document.addEventListener("htmx:beforeSwap", function (evt) {
    if (keptWhileUsed(evt.detail.elt)) evt.detail.shouldSwap = false;
  });

  // A "choose all" checkbox ([data-choose-all]: a form's id) checks or clears every checkbox of that form listed.
  document.addEventListener("change", function (evt) {
    var all = evt.target;
    if (!all.dataset || !all.dataset.chooseAll) return;
    document.querySelectorAll('input[type=checkbox][form="' + all.dataset.chooseAll + '"]').forEach(function (box) {
      box.checked = all.checked;
    });
  });

  // J / K move between the rows of the page's list ([data-rows] > [data-row]); Enter opens the focused row's link.
  function rows() {
    var list = document.querySelector("[data-rows]");
    return list ? Array.prototype.slice.call(list.querySelectorAll("[data-row]")) : [];
  }
  document.addEventListener("keydown", function (evt) {
    if (evt.altKey || evt.ctrlKey || evt.metaKey) return;
    var target = evt.target;
    if (target && (target.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(target.tagName))) return;
    var key = evt.key.toLowerCase();
    if (key !== "j" && key !== "k") return;
    var all = rows();
    if (!all.length) return;
    var index = all.findIndex(function (row) { return row.classList.contains("current"); });
    index = key === "j" ? Math.min(index + 1, all.length - 1) : Math.max(index - 1, 0);
    all.forEach(function (row) { row.classList.remove("current"); row.removeAttribute("aria-current"); });
    var row = all[index];
    row.classList.add("current");
    row.setAttribute("aria-current", "true");
    var link = row.querySelector("a[href]");
    if (link) link.focus(); else row.scrollIntoView({ block: "nearest" });
    evt.preventDefault();
  });
})();
