/* Recovery Console's service worker (served at /sw.js, scope "/"): shows a Web Push notification and,
   when it is tapped, opens the workbench it names (focusing a console window already open on it).
   The message is JSON from workflows/push.py: {title, body, url, tag, kind}. No caching: the console is
   live data, and a stale page would be worse than none. */
"use strict";

self.addEventListener("install", function () { self.skipWaiting(); });
self.addEventListener("activate", function (event) { event.waitUntil(self.clients.claim()); });

self.addEventListener("push", function (event) {
  var data = {};
  try { data = event.data ? event.data.json() : {}; } catch (e) { data = {body: event.data ? event.data.text() : ""}; }
  var url = new URL(data.url || "/", self.location.origin);
  if (url.origin !== self.location.origin || url.pathname.indexOf("//") === 0) {
    url = new URL("/", self.location.origin); // only ever the console: no other site, no "//elsewhere" path
  }
  event.waitUntil(self.registration.showNotification(data.title || "Recovery Console", {
    body: data.body || "",
    tag: data.tag || undefined,
    renotify: Boolean(data.tag),
    requireInteraction: data.kind === "escalated",
    icon: "/static/icon-192.png",
    badge: "/static/icon-192.png",
    data: {url: url.pathname + url.search}
  }));
});

self.addEventListener("notificationclick", function (event) {
  event.notification.close();
  var path = (event.notification.data && event.notification.data.url) || "/";
  var url = new URL(path, self.location.origin);
  if (url.origin !== self.location.origin) { url = new URL("/", self.location.origin); } // "//elsewhere" too
  var target = url.href;
  event.waitUntil(self.clients.matchAll({type: "window", includeUncontrolled: true}).then(function (windows) {
    for (var i = 0; i < windows.length; i++) {
      if (windows[i].url === target && "focus" in windows[i]) { return windows[i].focus(); }
    }
    return self.clients.openWindow(target);
  }));
});
