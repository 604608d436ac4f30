// Reloads a reading page of the errand dashboard every data-refresh
// seconds, unless the visitor is typing in a form or the page is hidden.
// The dashboard works without it.
(function () {
  "use strict";
  var seconds = parseInt(document.body.getAttribute("data-refresh"), 10);
  if (!(seconds > 0)) {
    return;
  }
  // Says the script ran: the browser test checks it, so a policy that
  // blocks the script cannot go unnoticed.
  document.body.setAttribute("data-refreshing", "on");
  function tick() {
    var el = document.activeElement;
    var busy = el && (el.tagName === "INPUT" || el.tagName === "SELECT" || el.tagName === "TEXTAREA");
    if (document.visibilityState === "visible" && !busy) {
      window.location.reload();
      return;
    }
    window.setTimeout(tick, seconds * 1000);
  }
  window.setTimeout(tick, seconds * 1000);
})();
