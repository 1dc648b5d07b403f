/* "Notifications on this device": registers the service worker (/sw.js), subscribes this browser to Web
   Push with the console's VAPID public key, and sends the subscription to the console; turning it off
   unsubscribes the browser and tells the console. The page works without it (the list and its forms). */
(function () {
  "use strict";

  var box = document.querySelector("[data-push]");
  if (!box) { return; }
  var button = box.querySelector("[data-push-toggle]");
  var status = box.querySelector("[data-push-status]");
  var csrf = (box.querySelector("input[name=csrfmiddlewaretoken]") || {}).value || "";

  function say(text) { status.textContent = text; }

  function keyBytes(base64url) {
    var text = atob(base64url.replace(/-/g, "+").replace(/_/g, "/") + "===".slice((base64url.length + 3) % 4));
    var bytes = new Uint8Array(text.length);
    for (var i = 0; i < text.length; i++) { bytes[i] = text.charCodeAt(i); }
    return bytes;
  }

  function deviceName() {
    var ua = navigator.userAgent;
    var os = /Android/.test(ua) ? "Android" : /iPhone|iPad/.test(ua) ? "iOS" : /Mac OS X/.test(ua) ? "macOS"
      : /Windows/.test(ua) ? "Windows" : /Linux/.test(ua) ? "Linux" : "a device";
    var browser = /Edg\//.test(ua) ? "Edge" : /Firefox\//.test(ua) ? "Firefox" : /Chrome\//.test(ua) ? "Chrome"
      : /Safari\//.test(ua) ? "Safari" : "a browser";
    return browser + " on " + os;
  }

  function post(url, body) {
    return fetch(url, {method: "POST", credentials: "same-origin", body: body,
      headers: {"Content-Type": "application/json", "Accept": "application/json", "X-CSRFToken": csrf}});
  }

  function show(subscription) {
    box.dataset.pushState = subscription ? "on" : "off";
    button.textContent = subscription ? "Turn off on this device" : "Turn on for this device";
    button.disabled = false;
  }

  if (!("serviceWorker" in navigator) || !("PushManager" in window) || !("Notification" in window)) {
    say("This browser cannot receive push notifications. On an iPhone, add the console to the Home Screen " +
        "first (Share, Add to Home Screen) and open it from there.");
    return;
  }
  if (!box.dataset.vapidKey) {
    say("Web Push is off on this console (an admin sets VAPID_PRIVATE_KEY).");
    return;
  }

  var ready = navigator.serviceWorker.register("/sw.js", {scope: "/"}).then(function () {
    return navigator.serviceWorker.ready;
  });

  ready.then(function (registration) {
    return registration.pushManager.getSubscription();
  }).then(show).catch(function (error) { say("The service worker did not start: " + error.message); });

  function turnOn(registration) {
    return Notification.requestPermission().then(function (permission) {
      if (permission !== "granted") { throw new Error("notifications are blocked for this site in the browser"); }
      return registration.pushManager.subscribe({userVisibleOnly: true,
                                                 applicationServerKey: keyBytes(box.dataset.vapidKey)});
    }).then(function (subscription) {
      var body = subscription.toJSON();
      body.device = deviceName();
      return post(box.dataset.subscribeUrl, JSON.stringify(body)).then(function (response) {
        return response.json().then(function (answer) {
          if (!response.ok) {
            subscription.unsubscribe();
            throw new Error(answer.error || "the console refused the subscription");
          }
          say("On: " + answer.device + " gets a notification when a checkpoint is assigned to you, escalated to " +
              "you, or a proposal waits for your approval. Reload to see it in the list.");
          return subscription;
        });
      });
    });
  }

  function turnOff(registration, subscription) {
    var row = document.querySelector("[data-push-endpoint='" + CSS.escape(subscription.endpoint) + "']");
    return subscription.unsubscribe().then(function () {
      if (row) { return post(row.dataset.unsubscribeUrl, "{}"); }
    }).then(function () { say("Off on this device."); return null; });
  }

  button.addEventListener("click", function () {
    button.disabled = true;
    ready.then(function (registration) {
      return registration.pushManager.getSubscription().then(function (subscription) {
        return subscription ? turnOff(registration, subscription) : turnOn(registration);
      });
    }).then(show).catch(function (error) {
      say("Not turned on: " + error.message + ".");
      button.disabled = false;
    });
  });
})();
