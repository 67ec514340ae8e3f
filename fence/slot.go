package fence

import "strconv"

// SlotResource names one slot of a semaphore's resource, for fencing a
// semaphore's permits with a plain Validator.
//
// A semaphore's permits are held together, each with a token of its own, so
// fencing the resource as a whole with "highest token wins" would refuse
// every permit holder but the newest. But a permit is a slot: fencer grants
// the lowest free slot 0..N-1, and a slot's next holder is granted only once
// the previous one has gone, with a larger token. So the tokens of one slot
// increase, and a store that fences each (resource, slot) separately with
// the plain rule refuses a holder whose slot has passed to another, while
// the holders of the other slots go on. Fence with the slot of the permit
// (client.Lease.Slot(), FENCE.SEMACQUIRE's reply, $FENCER_SLOT) the state
// that belongs to that slot: its worker's output, its share of a quota, its
// connection.
//
// The name is resource + "#slot=" + the slot in decimal ("jobs#slot=2").
// The decimal has no '#', so the name splits at its last "#slot=" into one
// resource and one slot: two slots never share a name. Keep "#slot=" out of
// the names of resources fenced as a whole, so that none of them is taken
// for a slot. SlotResource panics if slot is negative (a lease that is not
// a permit has slot -1).
func SlotResource(resource string, slot int) string {
	if slot < 0 {
		panic("fence: SlotResource: negative slot " + strconv.Itoa(slot))
	}
	return resource + "#slot=" + strconv.Itoa(slot)
}
