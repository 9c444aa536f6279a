import { JOB_TYPES } from '../../src/shared/config/job-config';
import { dataflowExecutor } from '../../src/worker/executors/dataflow-executor';
import { executorForType } from '../../src/worker/executors/executor-for-type';
import { httpExecutor } from '../../src/worker/executors/http-executor';
import { scriptExecutor } from '../../src/worker/executors/script-executor';
import { simpleExecutor } from '../../src/worker/executors/simple-executor';

describe('executorForType', () => {
  it('has one executor for every job type ElasticJob knows', () => {
    expect(JOB_TYPES.map((type) => executorForType(type))).toEqual([simpleExecutor, dataflowExecutor, scriptExecutor, httpExecutor]);
    expect(JOB_TYPES).toEqual(['SIMPLE', 'DATAFLOW', 'SCRIPT', 'HTTP']);
  });
});
