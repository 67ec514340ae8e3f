// Package fence will hold the storage-side validators that reject a writer
// whose fencing token is lower than one already admitted. It is not built yet
// (see the storage-side fencing issue).
package fence
