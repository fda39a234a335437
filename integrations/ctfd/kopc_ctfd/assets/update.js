// The update form needs nothing beyond its fields (update.html).
