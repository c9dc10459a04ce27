# Writes protocol_0.pickle … protocol_5.pickle: one small snapshot (the fresh-user review's good_p*.pickle,
# plus a frame whose name and file need UNICODE's raw-unicode-escape in protocol 0) pickled with each
# protocol. Protocols 0 and 1 have no PROTO opcode and write ints beyond 32 bits with the text opcode
# LONG, bools with INT ("I01"), and (protocol 0) every str with UNICODE. Run: python3 make_protocol_pickles.py
import pickle

A = 140000000000000
frame = {'name': 'f\u00e9\\n\u20ac', 'filename': 'C:\\dir\\m\U0001f600.py', 'line': 7}
blocks = [
    {'address': A, 'size': 512, 'requested_size': 4, 'state': 'active_allocated', 'frames': [frame]},
    {'address': A + 512, 'size': 2097152 - 512, 'requested_size': 0, 'state': 'inactive', 'frames': []},
]
segment = {'device': 0, 'address': A, 'total_size': 2097152, 'allocated_size': 512, 'active_size': 512,
           'requested_size': 4, 'stream': 0, 'segment_type': 'small', 'is_expandable': False, 'blocks': blocks}
trace = [
    {'action': 'alloc', 'addr': A + 512, 'size': 1024, 'stream': 0, 'time_us': 5, 'frames': [frame]},
    {'action': 'free_requested', 'addr': A + 512, 'size': 1024, 'stream': 0, 'time_us': 6, 'frames': [frame]},
    {'action': 'free_completed', 'addr': A + 512, 'size': 1024, 'stream': 0, 'time_us': 7, 'frames': []},
]
snapshot = {'segments': [segment], 'device_traces': [trace], 'allocator_settings': {'max_split_size': 2 ** 63 - 1}}
for protocol in range(6):
    with open(f'protocol_{protocol}.pickle', 'wb') as f:
        pickle.dump(snapshot, f, protocol=protocol)
