// Follows a running job's output stream on its page: each chunk the job
// writes arrives as a server-sent event and is appended, until the job
// finishes. The page works without it, showing the stream as it was when
// loaded.
(function () {
  "use strict";
  var pre = document.querySelector("pre[data-stream]");
  if (!pre || typeof EventSource === "undefined") {
    return;
  }
  var shown = 64 * 1024; // as much as the page shows when it loads
  var state = document.getElementById("stream-state");
  var src = new EventSource(pre.getAttribute("data-stream") + "?after=" + encodeURIComponent(pre.getAttribute("data-after")));
  pre.setAttribute("data-streaming", "on");
  src.onmessage = function (e) {
    var text = pre.textContent + e.data;
    pre.textContent = text.length > shown ? text.slice(text.length - shown) : text;
    pre.setAttribute("data-after", e.lastEventId);
  };
  src.addEventListener("end", function (e) {
    src.close();
    pre.setAttribute("data-streaming", "ended");
    if (state) {
      state.textContent = "The job has finished (" + e.data + "); reload for its outcome.";
    }
  });
})();
