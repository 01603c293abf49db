// The wharf console's one script: refreshes a page marked data-live in place, every few
// seconds, while nobody is typing in it. Every page works without it, only less live.
(function () {
  "use strict";
  var main = document.querySelector("main[data-live]");
  if (!main || !window.fetch || !window.DOMParser) { return; }
  var seconds = Math.max(5, parseInt(main.getAttribute("data-live"), 10) || 10);
  var stamp = document.createElement("p");
  stamp.className = "live-stamp";
  stamp.textContent = "live: refreshes every " + seconds + " s";
  main.appendChild(stamp);
  function busy() {
    var a = document.activeElement;
    return a && (a.tagName === "INPUT" || a.tagName === "SELECT" || a.tagName === "TEXTAREA");
  }
  function refresh() {
    if (document.hidden || busy()) { return; }
    fetch(window.location.href, { credentials: "same-origin", headers: { "x-console-refresh": "1" } })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (text) {
        if (!text) { return; }
        var next = new DOMParser().parseFromString(text, "text/html").querySelector("main[data-live]");
        if (!next) { return; }
        main.innerHTML = next.innerHTML;
        stamp.textContent = "live: updated " + new Date().toLocaleTimeString();
        main.appendChild(stamp);
      })
      .catch(function () { stamp.textContent = "live: refresh failed, retrying"; main.appendChild(stamp); });
  }
  window.setInterval(refresh, seconds * 1000);
})();
