-- An Nsight Systems export of a run recorded without --cuda-memory-usage: kernels, but no memory table.
CREATE TABLE StringIds (id INTEGER NOT NULL PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO StringIds VALUES (1, 'vectorAdd');
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL, deviceId INTEGER NOT NULL, streamId INTEGER NOT NULL,
  correlationId INTEGER, demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL);
INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (100, 180, 0, 7, 5, 1, 1), (200, 260, 0, 7, 6, 1, 1);
