/* Search on a page opened from disk (file://), with nothing fetched from the network.
 *
 * Material's search runs in a Web Worker, and a browser refuses to start a worker from a
 * file:// page. Material's offline plugin therefore lists a shim for it, loaded from a CDN,
 * unless a polyfill whose name contains "iframe-worker" is listed already: this file is that
 * polyfill, our own. On file:// pages it replaces `Worker` with a stand-in that runs the
 * worker's script in a hidden same-origin iframe (a `srcdoc` frame): messages to the worker
 * are dispatched as "message" events on the frame's window, and the script's `postMessage`
 * comes back as "message" events on the stand-in. Served over http(s), nothing changes.
 */
(function () {
  "use strict";
  if (location.protocol !== "file:") return;

  class FileWorker extends EventTarget {
    constructor(url) {
      super();
      this.onmessage = null;
      this.queue = [];
      this.frame = document.createElement("iframe");
      this.frame.hidden = true;
      this.frame.srcdoc = "<!doctype html><title>search worker</title>";
      this.frame.addEventListener("load", () => this.start(new URL(url, location.href).href));
      document.documentElement.appendChild(this.frame);
    }

    start(src) {
      const scope = this.frame.contentWindow;
      scope.postMessage = (data) => {  // the worker's answers
        const event = new MessageEvent("message", { data: data });
        if (typeof this.onmessage === "function") this.onmessage(event);
        this.dispatchEvent(event);
      };
      scope.importScripts = () => {
        throw new Error("search: only English is supported on a page opened from disk");
      };
      const script = scope.document.createElement("script");
      script.src = src;
      script.addEventListener("load", () => {
        this.scope = scope;
        this.queue.splice(0).forEach((data) => this.postMessage(data));
      });
      scope.document.head.appendChild(script);
    }

    postMessage(data) {  // a message to the worker
      if (!this.scope) {
        this.queue.push(data);
        return;
      }
      this.scope.dispatchEvent(new this.scope.MessageEvent("message", { data: data }));
    }

    terminate() {
      this.frame.remove();
    }
  }

  window.Worker = FileWorker;
})();
