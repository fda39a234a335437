// The create form needs nothing beyond its fields (create.html).
CTFd.plugin.run(() => {});
