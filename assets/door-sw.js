// The door page's service worker. It keeps one thing, the door's page, so
// that a reload without the network still opens the door (the page keeps
// its queue, keys and revocations in localStorage itself). A navigation to
// the page goes to the network first, so a page served fresh wins whenever
// there is one, and falls back to the copy kept. The API's requests are
// never answered here: the page must see them fail to know it is offline.
const CACHE = "door-page-v1";
const page = () => new URL("scan", self.registration.scope).href;

self.addEventListener("install", (event) => {
  // The API's requests go straight to the network, never through this
  // worker (the static routing API, where the browser has it): faster, and
  // the network's state is the page's own.
  if (event.addRoutes) {
    event.addRoutes([{ condition: { urlPattern: "/v1/*" }, source: "network" }]).catch(() => {});
  }
  // Kept at once: the first load came before this worker existed.
  event.waitUntil(caches.open(CACHE).then((cache) => cache.add(page())).then(() => self.skipWaiting()));
});

self.addEventListener("activate", (event) => {
  event.waitUntil(self.clients.claim());
});

self.addEventListener("fetch", (event) => {
  const request = event.request;
  if (request.mode !== "navigate" || new URL(request.url).pathname !== new URL(page()).pathname) return;
  event.respondWith((async () => {
    const cache = await caches.open(CACHE);
    try {
      const response = await fetch(request);
      if (response.ok) await cache.put(page(), response.clone());
      return response;
    } catch (error) {
      const kept = await cache.match(page());
      if (kept) return kept;
      throw error;
    }
  })());
});
