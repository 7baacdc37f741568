//! routechain facade (filled in below).
